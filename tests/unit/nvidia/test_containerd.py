"""containerd drop-in for the NVIDIA runtime and CDI: versions, imports edit, rendering
(``plugins/module_utils/nvidia/containerd.py``)."""

from __future__ import annotations

import tomllib

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as cc

pytestmark = pytest.mark.unit

CONTAINERD_16 = "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3"
CONTAINERD_24 = "containerd github.com/containerd/containerd/v2 v2.4.2 "

# A version 2 main file as a kubeadm node on containerd 1.x has it: systemd cgroups for
# runc, Debian's CNI directory. The drop-in must not lose either.
MAIN_V2 = """\
version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.10"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
"""

MAIN_V3 = """\
# site configuration
version = 3
root = "/var/lib/containerd"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = true
"""


def plan(main: str | None, release: str = CONTAINERD_24, others=None, **kw) -> cc.DropinPlan:
    return cc.plan_dropin(
        main_text=main,
        main_path="/etc/containerd/config.toml",
        dropin_path="/etc/containerd/conf.d/99-nvidia.toml",
        containerd_version=release,
        other_dropins=others or {},
        **kw,
    )


# ----------------------------------------------------------------------------- versions


def test_containerd_release_from_version_output() -> None:
    assert cc.parse_containerd_version(CONTAINERD_16) == (1, 6, 20)
    assert cc.parse_containerd_version(CONTAINERD_24) == (2, 4, 2)
    assert cc.parse_containerd_version("2.1.4") == (2, 1, 4)
    with pytest.raises(cc.ConfigError, match="nvidia_container_toolkit_containerd_version"):
        cc.parse_containerd_version("bash: containerd: command not found")


def test_toolkit_older_than_1_17_4_refused_on_containerd_2() -> None:
    with pytest.raises(cc.ConfigError) as err:
        cc.check_toolkit("1.14.6", CONTAINERD_24, enable_cdi=True)
    text = str(err.value)
    assert "nvidia_container_toolkit_version=1.14.6" in text
    assert "containerd 2.4.2" in text and "pin 1.17.4 or newer" in text
    assert cc.check_toolkit("1.17.4", CONTAINERD_24, True)["default_config_version"] == 3
    assert cc.check_toolkit("1.14.6", "1.7.27", True)["default_config_version"] == 2


def test_cdi_refused_on_containerd_before_1_7() -> None:
    with pytest.raises(
        cc.ConfigError, match=r"nvidia_container_toolkit_enable_cdi=true: containerd 1\.6\.20"
    ):
        cc.check_toolkit("1.17.8", CONTAINERD_16, enable_cdi=True)
    assert cc.check_toolkit("1.17.8", CONTAINERD_16, enable_cdi=False)["cdi_default"] is False


@pytest.mark.parametrize(
    ("version", "plugin"),
    [
        (2, "io.containerd.grpc.v1.cri"),
        (3, "io.containerd.cri.v1.runtime"),
        (4, "io.containerd.cri.v1.runtime"),
    ],
)
def test_cri_plugin_per_config_version(version: int, plugin: str) -> None:
    assert cc.cri_plugin(version) == plugin


# ------------------------------------------------------------------------------ imports


def test_imports_line_added_after_version_and_nothing_else_changes() -> None:
    out = cc.with_import(MAIN_V3, "/etc/containerd/conf.d/*.toml")
    before, after = MAIN_V3.splitlines(), out.splitlines()
    assert after[2] == 'imports = ["/etc/containerd/conf.d/*.toml"]'
    assert after[:2] + after[3:] == before


def test_imports_entry_appended_to_an_existing_multiline_array() -> None:
    text = 'version = 2\nimports = [\n  "/etc/site/*.toml", # site\n]\n\n[plugins]\n'
    out = cc.with_import(text, "/etc/containerd/conf.d/*.toml")
    assert tomllib.loads(out)["imports"] == ["/etc/site/*.toml", "/etc/containerd/conf.d/*.toml"]
    assert out.endswith("]\n\n[plugins]\n")
    assert out.startswith('version = 2\nimports = [\n  "/etc/site/*.toml", # site')


def test_import_covered_by_glob_or_relative_path() -> None:
    main = "/etc/containerd/config.toml"
    dropin = "/etc/containerd/conf.d/99-nvidia.toml"
    assert cc.import_covers(["/etc/containerd/conf.d/*.toml"], main, dropin)
    assert cc.import_covers(["conf.d/99-nvidia.toml"], main, dropin)
    assert not cc.import_covers(["/etc/containerd/other/*.toml"], main, dropin)


# ------------------------------------------------------------------------------ drop-in


def test_version_2_dropin_below_2_1_carries_the_whole_cri_section() -> None:
    result = plan(MAIN_V2, "1.7.27")
    dropin = tomllib.loads(result.dropin_text)
    assert dropin["version"] == 2
    cri = dropin["plugins"]["io.containerd.grpc.v1.cri"]
    assert result.copied_section
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10"
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni"}
    assert cri["containerd"]["runtimes"]["runc"]["options"] == {"SystemdCgroup": True}
    assert cri["containerd"]["runtimes"]["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"},
    }
    assert cri["enable_cdi"] is True
    assert cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    main = tomllib.loads(result.main_text)
    assert main["imports"] == ["/etc/containerd/conf.d/*.toml"]


def test_version_3_main_on_containerd_2_4_gets_a_version_3_dropin() -> None:
    # containerd 2.4's own default (and config dump) is version 4; the drop-in must follow
    # the main file, not the binary
    result = plan(MAIN_V3)
    dropin = tomllib.loads(result.dropin_text)
    assert dropin["version"] == 3
    assert not result.copied_section
    section = dropin["plugins"]["io.containerd.cri.v1.runtime"]
    # containerd 2.x has CDI on (2.4 no longer knows the enable_cdi switch)
    assert set(section) == {"containerd", "cdi_spec_dirs"}
    assert section["containerd"]["runtimes"]["nvidia"]["options"] == {
        "SystemdCgroup": True,
        "BinaryName": "/usr/bin/nvidia-container-runtime",
    }


def test_version_4_main_gets_a_version_4_dropin() -> None:
    assert tomllib.loads(plan("version = 4\n").dropin_text)["version"] == 4


def test_absent_main_file_created_with_version_and_imports_only() -> None:
    assert tomllib.loads(plan(None).main_text) == {
        "version": 3,
        "imports": ["/etc/containerd/conf.d/*.toml"],
    }
    assert tomllib.loads(plan(None, "1.7.27").main_text)["version"] == 2


def test_second_plan_leaves_the_main_file_alone() -> None:
    first = plan(MAIN_V3)
    again = plan(first.main_text)
    assert again.main_text is None
    assert again.dropin_text == first.dropin_text


def test_mismatched_other_dropin_refused_naming_it() -> None:
    with pytest.raises(cc.ConfigError) as err:
        plan(MAIN_V3, others={"/etc/containerd/conf.d/50-site.toml": "version = 2\n"})
    text = str(err.value)
    assert "/etc/containerd/conf.d/50-site.toml is a version 2 drop-in" in text
    assert "/etc/containerd/config.toml is version 3" in text


def test_dropin_without_version_counts_as_version_1() -> None:
    with pytest.raises(cc.ConfigError, match="is a version 1 drop-in"):
        plan(MAIN_V2, "1.7.27", others={"/etc/containerd/conf.d/10-x.toml": "[plugins]\n"})


def test_version_1_main_refused() -> None:
    with pytest.raises(cc.ConfigError, match="version 1 configuration"):
        plan('[plugins.cri]\n  sandbox_image = "x"\n', "1.7.27")


def test_version_3_main_refused_on_containerd_1() -> None:
    with pytest.raises(cc.ConfigError, match="reads version 2 at most"):
        plan(MAIN_V3, "1.7.27")


def test_default_runtime_and_no_cdi() -> None:
    section = tomllib.loads(plan(MAIN_V3, enable_cdi=False, set_as_default=True).dropin_text)[
        "plugins"
    ]["io.containerd.cri.v1.runtime"]
    assert section["containerd"]["default_runtime_name"] == "nvidia"
    assert "enable_cdi" not in section and "cdi_spec_dirs" not in section


def test_dump_toml_round_trip() -> None:
    data = {
        "version": 2,
        "imports": ["/a/*.toml"],
        "plugins": {
            "io.containerd.grpc.v1.cri": {
                "enable_cdi": True,
                "max_container_log_line_size": 16384,
                "registry": {"mirrors": {"docker.io": {"endpoint": ["https://m.example"]}}},
            },
            "io.containerd.x": {"hosts": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]},
        },
        "debug": {"level": "info", "weight": 0.5, "quote": 'a"b\\c'},
    }
    assert tomllib.loads(cc.dump_toml(data)) == data


# ------------------------------------------------------------------------- verification


def test_effective_problems_from_a_dump() -> None:
    good = tomllib.loads(plan(MAIN_V3).dropin_text)
    assert cc.effective_problems(
        good, expect={"containerd.runtimes.runc.options.SystemdCgroup": True}
    ) == [
        "plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options.SystemdCgroup"
        " is {}, expected True"
    ]
    section = good["plugins"]["io.containerd.cri.v1.runtime"]
    section["enable_cdi"] = False
    section["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] = ""
    problems = cc.effective_problems(good)
    assert problems == [
        "runtime 'nvidia' has options.BinaryName='', expected '/usr/bin/nvidia-container-runtime'",
        "plugins.'io.containerd.cri.v1.runtime'.enable_cdi is False, not true",
    ]


# ------------------------------------------------------- imports in load order (1.x vs 2.x)

SITE_V2 = """\
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  device_ownership_from_security_context = true
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
"""
MAIN_V2_IMPORTS = (
    'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n' + MAIN_V2.split("\n", 1)[1]
)


def _section(result: cc.DropinPlan, plugin: str) -> dict:
    return tomllib.loads(result.dropin_text)["plugins"][plugin]


def test_on_1x_the_dropin_carries_the_section_of_the_last_earlier_file() -> None:
    # containerd 1.7 replaces the whole CRI section with 10-site's: the main file's
    # settings are already out of effect, 10-site's must stay in effect
    result = plan(
        MAIN_V2_IMPORTS, "1.7.35", others={"/etc/containerd/conf.d/10-site.toml": SITE_V2}
    )
    section = _section(result, "io.containerd.grpc.v1.cri")
    assert result.copied_section
    assert section["device_ownership_from_security_context"] is True
    assert section["registry"]["config_path"] == "/etc/containerd/certs.d"
    assert "sandbox_image" not in section


def test_on_1x_the_runtimes_in_effect_are_carried_in_order() -> None:
    dump = {
        "version": 2,
        "plugins": {
            "io.containerd.grpc.v1.cri": {
                "containerd": {
                    "runtimes": {
                        "runc": {"runtime_type": cc.RUNC_V2, "options": {"SystemdCgroup": False}}
                    }
                }
            }
        },
    }
    result = plan(
        MAIN_V2_IMPORTS,
        "1.7.35",
        others={"/etc/containerd/conf.d/10-site.toml": SITE_V2},
        effective=dump,
    )
    runtimes = _section(result, "io.containerd.grpc.v1.cri")["containerd"]["runtimes"]
    assert list(runtimes) == ["nvidia", "runc"]
    assert runtimes["runc"]["options"] == {"SystemdCgroup": False}
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is False


def test_a_later_file_that_would_replace_or_override_the_dropin_is_refused() -> None:
    late = "/etc/containerd/conf.d/zz-late.toml"
    with pytest.raises(cc.ConfigError, match=r"zz-late.toml is loaded after.*replaces"):
        plan(MAIN_V2_IMPORTS, "1.7.35", others={late: SITE_V2})
    override = "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false\n"
    main = 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    with pytest.raises(
        cc.ConfigError, match=r"sets plugins\.io\.containerd\.cri\.v1\.runtime\.enable_cdi"
    ):
        plan(main, "2.1.9", others={late: override})
    # a later file that sets keys the drop-in does not own is fine from 2.0
    harmless = (
        "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  max_container_log_line_size = 1\n"
    )
    assert not plan(main, "2.1.9", others={late: harmless}).copied_section


def test_the_runtime_keeps_its_own_options_and_takes_runcs_systemd_cgroup() -> None:
    main = MAIN_V3 + (
        "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]\n"
        '  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n'
        '  Root = "/run/nvidia-runc"\n'
    )
    nvidia = _section(plan(main, "2.1.9"), "io.containerd.cri.v1.runtime")["containerd"][
        "runtimes"
    ]["nvidia"]
    assert nvidia["options"] == {
        "SystemdCgroup": True,
        "BinaryName": "/usr/bin/nvidia-container-runtime",
        "Root": "/run/nvidia-runc",
    }


@pytest.mark.parametrize("release, written", [("1.7.35", True), ("2.1.9", True), ("2.4.2", False)])
def test_enable_cdi_is_written_where_containerd_knows_it(release, written) -> None:
    main = (MAIN_V2 if release.startswith("1.") else MAIN_V3) + ""
    plugin = cc.cri_plugin(2 if release.startswith("1.") else 3)
    section = _section(plan(main, release), plugin)
    assert ("enable_cdi" in section) is written
    assert section["cdi_spec_dirs"] == list(cc.DEFAULT_CDI_SPEC_DIRS)


@pytest.mark.parametrize(
    "writer, containerd, toolkit, dirs, chosen",
    [
        ("auto", "2.1.9", "1.20.2", cc.DEFAULT_CDI_SPEC_DIRS, "nvidia-ctk"),
        ("auto", "2.0.14", "1.20.2", cc.DEFAULT_CDI_SPEC_DIRS, "nvidia-ctk"),
        ("auto", "1.7.35", "1.20.2", cc.DEFAULT_CDI_SPEC_DIRS, "gpufleet"),
        ("auto", "2.4.2", "1.18.0", cc.DEFAULT_CDI_SPEC_DIRS, "gpufleet"),
        ("auto", "2.4.2", "1.20.2", ["/opt/cdi"], "gpufleet"),
        ("gpufleet", "2.4.2", "1.20.2", cc.DEFAULT_CDI_SPEC_DIRS, "gpufleet"),
    ],
)
def test_the_writer_is_nvidia_ctk_where_it_is_right(writer, containerd, toolkit, dirs, chosen):
    assert cc.choose_writer(writer, containerd, toolkit, dirs)[0] == chosen


def test_nvidia_ctk_asked_for_where_it_is_wrong_is_refused() -> None:
    with pytest.raises(cc.ConfigError, match=r"earlier drop-ins would be lost.*fix: use auto"):
        cc.choose_writer("nvidia-ctk", "1.7.35", "1.20.2")
    with pytest.raises(cc.ConfigError, match="is not one of auto, nvidia-ctk, gpufleet"):
        cc.choose_writer("ctk", "2.1.9", "1.20.2")
