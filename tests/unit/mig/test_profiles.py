"""MIG profile data and the parsers of ``nvidia-smi mig -lgip`` / ``-lgipp`` / ``-lgi``,
checked against real captures (tests/unit/data/gpu/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.mig import profiles as mp

from tests.unit.source_literals import written_outside

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"

LGIP_CAPTURES = {
    "h200-single/smi-mig-lgip.txt": (1, 7),
    "h200-x2-nvlink/smi-mig-lgip.txt": (2, 14),
    "public/a100-pcie-40gb/lgip.txt": (1, 6),
    "public/a30-24gb/lgip-all-used.txt": (1, 4),
}
LGIPP_CAPTURES = {
    "h200-single/smi-mig-lgipp.txt": (1, 7),
    "h200-x2-nvlink/smi-mig-lgipp.txt": (2, 14),
    "public/a30-24gb/lgipp.txt": (1, 4),
    "public/a100-sxm4-40gb/nvdocs-lgipp.txt": (1, 7),
}


def read(rel: str) -> str:
    return (DATA / rel).read_text()


def nvml_profiles() -> dict[int, dict]:
    """The GI profiles NVML reported on the real H200 (nvml.txt), keyed by profile ID."""
    out: dict[int, dict] = {}
    lines = read("h200-single/nvml.txt").splitlines()
    pat = re.compile(
        r"gi-profile \d+ id (\d+) slices (\d+) instances (\d+) mem_MiB (\d+) sm (\d+) "
        r"copy (\d+) dec (\d+) enc (\d+) jpeg (\d+) ofa (\d+)"
    )
    for i, line in enumerate(lines):
        m = pat.search(line)
        if m:
            pid, cslices, inst, mem, sm, ce, dec, enc, jpeg, ofa = map(int, m.groups())
            name = lines[i + 1].strip().removeprefix("name MIG ")
            out[pid] = dict(
                name=name, compute_slices=cslices, max_instances=inst, memory_mib=mem,
                multiprocessors=sm, copy_engines=ce, decoders=dec, encoders=enc,
                jpeg_engines=jpeg, ofa_engines=ofa,
            )  # fmt: skip
    return out


@pytest.mark.parametrize("rel", sorted(LGIP_CAPTURES))
def test_every_lgip_capture_parses(rel: str) -> None:
    gpus, rows_expected = LGIP_CAPTURES[rel]
    rows = mp.parse_lgip(read(rel))
    assert len(rows) == rows_expected
    assert len({r["gpu"] for r in rows}) == gpus
    for r in rows:
        assert re.fullmatch(r"\d+g\.\d+gb(\+me)?", r["name"]), r
        assert r["total"] >= 1
        assert r["memory_mib"] % 64 == 0
        assert abs(r["memory_mib"] / 1024 - r["memory_gib"]) < 0.01


@pytest.mark.parametrize("rel", sorted(LGIPP_CAPTURES))
def test_every_lgipp_capture_parses(rel: str) -> None:
    gpus, rows_expected = LGIPP_CAPTURES[rel]
    parsed = mp.parse_lgipp(read(rel))
    assert len(parsed) == gpus
    assert sum(len(v) for v in parsed.values()) == rows_expected
    for per_gpu in parsed.values():
        for starts, size in per_gpu.values():
            assert starts and size >= 1


def test_a30_all_used_capture_keeps_totals_with_zero_free() -> None:
    rows = {r["name"]: r for r in mp.parse_lgip(read("public/a30-24gb/lgip-all-used.txt"))}
    assert {n: (r["free"], r["total"]) for n, r in rows.items()} == {
        "1g.6gb": (0, 4),
        "1g.6gb+me": (0, 1),
        "2g.12gb": (0, 2),
        "4g.24gb": (0, 1),
    }
    assert rows["1g.6gb"]["profile_id"] == 14
    assert rows["4g.24gb"]["memory_mib"] == 24064  # 23.50 GiB


def test_h200_lgipp_values() -> None:
    parsed = mp.parse_lgipp(read("h200-single/smi-mig-lgipp.txt"))
    assert parsed[0][19] == ((0, 1, 2, 3, 4, 5, 6), 1)
    assert parsed[0][15] == ((0, 2, 4, 6), 2)
    assert parsed[0][9] == ((0, 4), 4)
    assert parsed[0][5] == ((0,), 4)
    assert parsed[0][0] == ((0,), 8)


def test_h200_builtin_equals_parsed_real_capture() -> None:
    parsed = mp.model_from_nvidia_smi(
        "NVIDIA H200",
        143771,
        read("h200-single/smi-mig-lgip.txt"),
        read("h200-single/smi-mig-lgipp.txt"),
    )
    assert parsed == mp.MODELS["NVIDIA H200"]


def test_h200_second_gpu_of_two_parses_the_same() -> None:
    parsed = mp.model_from_nvidia_smi(
        "NVIDIA H200",
        143771,
        read("h200-x2-nvlink/smi-mig-lgip.txt"),
        read("h200-x2-nvlink/smi-mig-lgipp.txt"),
        gpu_index=1,
    )
    assert parsed == mp.MODELS["NVIDIA H200"]


def test_h200_builtin_matches_nvml_and_fb_total() -> None:
    h200 = mp.model("NVIDIA H200")
    nvml = nvml_profiles()
    assert {p.profile_id for p in h200.profiles} == set(nvml)
    for p in h200.profiles:
        n = nvml[p.profile_id]
        assert p.name == n["name"]
        assert p.compute_slices == n["compute_slices"]
        for key in ("max_instances", "memory_mib", "multiprocessors", "copy_engines"):
            assert getattr(p, key) == n[key], (p.name, key)
        for key in ("decoders", "encoders", "jpeg_engines", "ofa_engines"):
            assert getattr(p, key) == n[key], (p.name, key)
    fb_total = re.search(
        r"FB Memory Usage\s*\n\s*Total\s*:\s*(\d+) MiB", read("h200-single/smi-q.txt")
    )
    assert fb_total and int(fb_total.group(1)) == h200.memory_mib
    device_id = re.search(r"Device Id\s*:\s*(0x[0-9A-F]+)", read("h200-single/smi-q.txt"))
    assert device_id and device_id.group(1) in h200.pci_device_ids


def test_a100_pcie_builtin_equals_parsed_public_capture() -> None:
    # The capture (driver 510) predates 1g.10gb (R525+) and has no -lgipp: placements come
    # from the built-in data, every printed value from the capture.
    parsed = mp.model_from_nvidia_smi(
        "NVIDIA A100-PCIE-40GB", 40960, read("public/a100-pcie-40gb/lgip.txt"), None
    )
    builtin = mp.model("NVIDIA A100-PCIE-40GB")
    assert parsed.profiles == tuple(p for p in builtin.profiles if p.name != "1g.10gb")


def test_a30_builtin_equals_parsed_public_capture() -> None:
    parsed = mp.model_from_nvidia_smi(
        "NVIDIA A30",
        24576,
        read("public/a30-24gb/lgip-all-used.txt"),
        read("public/a30-24gb/lgipp.txt"),
    )
    builtin = mp.model("a30")
    assert parsed.total_slices == builtin.total_slices == 4
    assert parsed.profiles == tuple(p for p in builtin.profiles if p.name != "2g.12gb+me")


def test_parsed_data_wins_over_builtin() -> None:
    text = read("h200-single/smi-mig-lgip.txt").replace(
        "32.50      No     26", "32.25      No     26"
    )
    parsed = mp.model_from_nvidia_smi(
        "NVIDIA H200", 143771, text, read("h200-single/smi-mig-lgipp.txt")
    )
    assert parsed.profile("1g.35gb").memory_mib == 33024
    assert mp.model("h200").profile("1g.35gb").memory_mib == 33280


def test_unknown_gpu_parsed_without_lgipp_names_the_fix() -> None:
    with pytest.raises(mp.LgipParseError, match=r"nvidia-smi mig -lgipp"):
        mp.model_from_nvidia_smi("NVIDIA B999", 1, read("h200-single/smi-mig-lgip.txt"), None)


def test_unknown_gpu_parsed_with_lgipp_gets_arch_from_name() -> None:
    m = mp.model_from_nvidia_smi(
        "NVIDIA H200 NVL-X",
        143000,
        read("h200-single/smi-mig-lgip.txt"),
        read("h200-single/smi-mig-lgipp.txt"),
    )
    assert (m.architecture, m.compute_capability, m.total_slices) == ("Hopper", "9.0", 8)


def test_truncated_lgip_row_is_an_error() -> None:
    text = "\n".join(read("h200-single/smi-mig-lgip.txt").splitlines()[:7])
    with pytest.raises(mp.LgipParseError, match=r"1g\.18gb"):
        mp.parse_lgip(text)


def test_lgipp_malformed_line_is_an_error() -> None:
    with pytest.raises(mp.LgipParseError, match="line 1"):
        mp.parse_lgipp("GPU  0 Profile ID 19 Placements: 0,1,2\n")


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        (
            "public/a100-pcie-40gb/lgi.txt",
            [("1g.5gb", 0, 1), ("1g.5gb", 1, 1), ("2g.10gb", 2, 2), ("3g.20gb", 4, 4)],
        ),
        ("public/a100-sxm4-40gb/nvdocs-lgi-2x3g.txt", [("3g.20gb", 4, 4), ("3g.20gb", 0, 4)]),
        ("public/a30-24gb/lgi-4x1g.txt", [("1g.6gb", s, 1) for s in range(4)]),
    ],
)  # fmt: skip
def test_lgi_captures_parse(rel: str, expected: list[tuple[str, int, int]]) -> None:
    assert [(r["profile"], r["start"], r["size"]) for r in mp.parse_lgi(read(rel))] == expected


def test_lgi_none_found() -> None:
    assert mp.parse_lgi("No GPU instances found: Not Found\n") == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H200", "NVIDIA H200"),
        ("nvidia h200", "NVIDIA H200"),
        ("H200", "NVIDIA H200"),
        ("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"),
        ("NVIDIA  A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
        ("a30", "NVIDIA A30"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"),
        ("h100-94gb", "NVIDIA H100 NVL"),
    ],
)
def test_model_lookup(name: str, expected: str) -> None:
    assert mp.model(name).name == expected


def test_unknown_model_lists_known_names() -> None:
    with pytest.raises(mp.UnknownGpuModel) as exc:
        mp.model("NVIDIA GeForce RTX 4070 Laptop GPU")
    for name in ("NVIDIA H200", "NVIDIA A30", "NVIDIA A100-SXM4-40GB", "h100-94gb"):
        assert name in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_unknown_profile_lists_valid_names() -> None:
    with pytest.raises(mp.UnknownProfile) as exc:
        mp.model("h200").profile("1g.10gb")
    assert "1g.18gb" in str(exc.value) and "7g.141gb" in str(exc.value)
    assert "NVIDIA H200" in str(exc.value)


def test_profile_lookup_by_name_full_name_and_id() -> None:
    h200 = mp.model("h200")
    assert h200.profile("MIG 3g.71gb") is h200.profile(9) is h200.profile("9")
    assert h200.profile("3g.71gb").placement_size == 4


@pytest.mark.parametrize("gpu", sorted(n for n, m in mp.MODELS.items() if m.profiles))
def test_builtin_models_are_consistent(gpu: str) -> None:
    m = mp.MODELS[gpu]
    # the guide's memory fractions: quarters on A30 and RTX PRO 6000, halves on RTX PRO
    # 5000 and 4500, eighths on the others
    halves = "RTX PRO 5000" in gpu or "RTX PRO 4500" in gpu
    assert m.total_slices == (4 if "A30" in gpu or "RTX PRO 6000" in gpu else 2 if halves else 8)
    assert len({p.name for p in m.profiles}) == len(m.profiles)
    assert len({p.profile_id for p in m.profiles}) == len(m.profiles)
    full = [p for p in m.profiles if p.slices == m.total_slices]
    # the full-GPU profile, and on Blackwell GB20x its +gfx twin
    assert len([p for p in full if "+gfx" not in p.name]) == 1
    assert all(p.max_instances == 1 for p in full)
    if "FB total not sourced" in m.note:
        assert m.memory_mib == max(p.memory_mib for p in full)
    else:
        assert max(p.memory_mib for p in full) < m.memory_mib
    for p in m.profiles:
        assert all(s + p.slices <= m.total_slices for s in p.placements)
        assert p.max_instances <= len(p.placements)
        assert p.ci_profile_id == {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[p.compute_slices]
        if p.media_extensions:
            assert p.max_instances == 1 and p.ofa_engines == 1
        # same-size profiles on the same memory slices have the same memory
        same = {q.memory_mib for q in m.profiles if q.slices == p.slices}
        assert len(same) == 1, (p.name, same)


def test_ci_profile_id_of_7g_is_4() -> None:
    # nvidia-smi mig -lcip marks the full CI of a 3g GI as "MIG 3g.20gb 2*" (NVML
    # NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 2), a 7g GI's as 4.
    assert mp.model("a100-40gb").profile("3g.20gb").ci_profile_id == 2
    assert mp.model("h200").profile("7g.141gb").ci_profile_id == 4


# --------------------------------------------------------------------------------------
# MIG profile syntax: one parser, mig.profiles.parse_profile
# --------------------------------------------------------------------------------------

#: Spellings of the NVIDIA MIG user guide ("Supported MIG Profiles", "CI profiles") and of
#: ``nvidia-smi mig -lgip``/``-lcip``: GPU-instance profiles, their ``+me``, ``-me``,
#: ``+gfx`` and ``+me.all`` variants (A30, H100, RTX PRO 6000 Blackwell), and compute-
#: instance profiles ``<c>c.<gi profile>``.
ACCEPTED = {
    "1g.5gb": mp.ProfileName(None, 1, 5, ""),
    "1g.5gb+me": mp.ProfileName(None, 1, 5, "+me"),
    "7g.40gb": mp.ProfileName(None, 7, 40, ""),
    "1g.10gb+me": mp.ProfileName(None, 1, 10, "+me"),
    "7g.141gb": mp.ProfileName(None, 7, 141, ""),
    "1g.24gb+gfx": mp.ProfileName(None, 1, 24, "+gfx"),
    "1g.24gb+me.all": mp.ProfileName(None, 1, 24, "+me.all"),
    "1g.24gb-me": mp.ProfileName(None, 1, 24, "-me"),
    "1c.3g.40gb": mp.ProfileName(1, 3, 40, ""),
    "2c.7g.80gb": mp.ProfileName(2, 7, 80, ""),
    "1c.2g.12gb+me": mp.ProfileName(1, 2, 12, "+me"),
}

#: Not a profile name as nvidia-smi prints it or the DRA driver publishes it.
REFUSED = (
    "",
    "MIG 1g.18gb",  # nvidia-smi's column: normalize_profile_name first
    "1G.18GB",
    " 1g.18gb",
    "1g.18gb ",
    "1g.18",
    "1g18gb",
    "g.18gb",
    "1g.gb",
    "0g.5gb",
    "01g.5gb",
    "1g.0gb",
    "1g.18gib",
    "1g.18gb+",
    "1g.18gb+xx",
    "1g.18gb+me.some",
    "1g.18gb.all",
    "1g.18gb+gfx.all",
    "1c.1c.3g.40gb",
    "1c3g.40gb",
    "c.3g.40gb",
    "+me",
)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_parse_profile_splits_the_documented_spellings(name: str) -> None:
    parsed = mp.parse_profile(name)
    assert parsed == ACCEPTED[name]
    assert parsed.name == name


@pytest.mark.parametrize("name", REFUSED)
def test_parse_profile_refuses(name: str) -> None:
    assert mp.parse_profile(name) is None


def test_parse_profile_refuses_what_is_not_text() -> None:
    assert mp.parse_profile(None) is None  # type: ignore[arg-type]
    assert mp.parse_profile(18) is None  # type: ignore[arg-type]


def test_the_gi_profile_of_a_compute_instance_profile() -> None:
    assert mp.parse_profile("1c.3g.40gb+me").gi_profile == "3g.40gb+me"
    assert mp.compute_instance_profile("3g.40gb", 3, 1) == "1c.3g.40gb"
    assert mp.compute_instance_profile("3g.40gb", 3, 3) == "3g.40gb"


def test_every_profile_of_the_tables_parses_as_a_gpu_instance_profile() -> None:
    names = sorted({p.name for m in mp.MODELS.values() for p in m.profiles})
    assert len(names) > 50
    for name in names:
        parsed = mp.parse_profile(name)
        assert parsed is not None and parsed.ci_slices is None, name
        assert parsed.name == name
        assert parsed.suffix in ("", *mp.PROFILE_SUFFIXES)


#: Profile syntax written outside ``mig/profiles.py``: a regular expression of a profile
#: (``\d+g\.\d+gb``) or the pieces of splitting or composing a name (``"g."``, ``"c."``).
PROFILE_SYNTAX = r"(?:\d|\]|\)|g)\\\.\S*gb|^(?:g\.|c\.)$"

PROFILE_SYNTAX_OWNERS = {
    "plugins/module_utils/mig/profiles.py",
    # nvidia/ (layer 1) reads NVML below mig/: the CI name it composes from NVML's GI
    # profile name and CI slice count is what nvidia-smi prints.
    "plugins/module_utils/nvidia/nvml.py",
}


def test_profile_syntax_pattern_finds_the_old_spellings() -> None:
    rx = re.compile(PROFILE_SYNTAX)
    for old in (
        r"^(\d+c\.)?\d+g\.\d+gb(\+me|\+gfx|-me|\+me\.all)?$",
        r"^[0-9]+g\.[0-9]+gb(\+me)?$",
        r"^(\d+)c\.((\d+)g\.\d+gb.*)$",
        "g.",
        "c.",
    ):
        assert rx.search(old), old
    assert not rx.search("give e.g. 1g.18gb") and not rx.search("1c.3g.40gb")


def test_profile_syntax_is_written_only_in_mig_profiles() -> None:
    assert written_outside(PROFILE_SYNTAX, PROFILE_SYNTAX_OWNERS) == []
