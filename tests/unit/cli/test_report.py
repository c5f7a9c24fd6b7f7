"""``gpufleet report``: its pages (Markdown, self-contained HTML) rendered from the figures
of ``report.fleet``, and its exit 2 with one line when the cluster cannot be read."""

from __future__ import annotations

import json
import re
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.report import fleet as fr
from click.testing import CliRunner
from rich.console import Console

from gpufleet.cli import main
from gpufleet.commands import report as report_cmd
from gpufleet.render import fleet_report as rp
from tests.integration.test_hostile_input_servers import (
    assert_names_refusing_server,
    timed,
    write_kubeconfig,
)
from tests.unit.report import test_paths as mixed
from tests.unit.report.test_fleet import CLAIMS, NODES, PODS, SLICES

pytestmark = pytest.mark.unit

META = {
    "server": "https://10.0.0.1:6443",
    "kubernetes_version": "v1.37.2",
    "resource_version": "v1",
    "api_requests": 6,
    "generated_at": "2026-12-03T09:00:00Z",
}


@pytest.fixture(scope="module")
def doc() -> dict:
    report = fr.build_report(SLICES, CLAIMS, PODS, NODES)
    report["meta"] = META
    return report


def test_html_is_self_contained_and_shows_each_profile(doc: dict) -> None:
    page = rp.render_html(doc)
    # nothing fetched: no script, no linked file, no remote stylesheet or image
    assert not re.search(r"<script|<link|<img|<iframe|\bsrc=|\bhref=|@import|url\(", page)
    # the only URL is the SVG namespace name, which is not fetched
    assert set(re.findall(r"https?://[^\s\"'<,]+", page)) == {
        "http://www.w3.org/2000/svg",
        META["server"],
    }
    charts = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(charts) == 2
    for chart in charts:  # well-formed SVG: a browser draws it as it is
        assert ET.fromstring(chart).tag == "{http://www.w3.org/2000/svg}svg"
    # one bar label per (model, profile): allocated / free of published
    assert "0 allocated, 3 free of 3" in page  # H200 1g.18gb
    assert "2 allocated, 0 free of 2" in page  # H200 whole GPUs
    assert '<th class="t">model</th>' in page  # text columns: headers aligned left too
    assert "28.8%" in page  # the hand-computed fragmentation 36/125
    assert "ml/wants-b200" in page and "no-device-published" in page


def test_html_escapes_names(doc: dict) -> None:
    evil = dict(doc, pool_label="<b>x</b>")
    assert "<b>x</b>" not in rp.render_html(evil)


def test_markdown_lists_rows_pending_and_leaked(doc: dict) -> None:
    text = rp.render_markdown(doc)
    assert "| NVIDIA-H200 | NVIDIA H200 | 1g.18gb | 3 | 0 | 3 | 54.0 | 0.0 | 54.0 | 54.0 |" in text
    assert "- fragmentation: 28.8%" in text
    assert "`ml/wants-h200`: all-allocated" in text
    assert "`ml/a100` (unreserved, 80.0 GiB)" in text


def test_a_closed_port_ends_with_exit_2_and_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = f"http://127.0.0.1:{port}"
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server)
    argv = ["report", "--kubeconfig", str(kubeconfig), "--json", str(tmp_path / "r.json")]
    result, elapsed = timed(CliRunner().invoke, main, argv, env={"COLUMNS": "2000"})
    assert_names_refusing_server(result, server, elapsed)
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "r.json").exists()


def test_a_kubeconfig_that_is_not_yaml_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [unclosed\n")
    result = CliRunner().invoke(main, ["report", "--kubeconfig", str(bad)])
    assert result.exit_code == 2, result.output
    assert str(bad) in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_an_output_in_a_missing_directory_is_refused_before_reading(tmp_path: Path) -> None:
    target = tmp_path / "nope" / "r.html"
    result = CliRunner().invoke(main, ["report", "--html", str(target)])
    assert result.exit_code == 2, result.output
    assert "does not exist" in result.output


@pytest.fixture(scope="module")
def mixed_doc() -> dict:
    """The fleet of tests/unit/report/test_paths.py: pools on the device plugin and on DRA."""
    report = fr.build_report(mixed.SLICES, mixed.CLAIMS, mixed.PODS, mixed.NODES)
    report["meta"] = META
    return report


def test_the_path_lines_name_each_paths_figures(mixed_doc: dict) -> None:
    assert rp.path_lines(mixed_doc) == [
        "device-plugin: 16 of 25 devices allocated (64.0%) on 4 node(s)",
        "dra: 2 of 5 devices allocated (40.0%) on 2 node(s)",
        "1 node(s) advertise their GPUs through both paths and count on both: both-1 "
        "(gpufleet validate: nodes.gpu-path-dual)",
    ]
    assert rp.path_lines({"cluster": {}}) == []  # a report written before the figures


def test_the_terminal_shows_the_paths_per_pool(mixed_doc: dict) -> None:
    console = Console(record=True, width=200)
    report_cmd.render_terminal(console, mixed_doc)
    text = console.export_text()
    assert "GPUs per path (NVIDIA device plugin, DRA) and pool" in text
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert "│ NVIDIA-H100 │ device-plugin │ 2 │ 16 │ 13 │ 3 │ 81.2% │ gpu 13/16 │" in rows
    assert "│ NVIDIA-H200 │ dra │ 2 │ 5 │ 2 │ 3 │ 40.0% │ 1g.18gb 1/2, gpu 1/3 │" in rows
    assert "device-plugin: 16 of 25 devices allocated (64.0%) on 4 node(s)" in text


def test_markdown_and_html_have_the_paths_per_pool(mixed_doc: dict) -> None:
    md = rp.render_markdown(mixed_doc)
    assert "## GPUs per path and pool" in md
    assert "- dra: 2 of 5 devices allocated (40.0%) on 2 node(s)" in md
    assert "| NVIDIA-A100 | device-plugin | 1 | 8 | 2 | 6 | 25.0% | 1g.10gb 2/7, gpu 0/1 |" in md
    assert "| NVIDIA-H200 | dra | 2 | 5 | 2 | 3 | 40.0% | 1g.18gb 1/2, gpu 1/3 |" in md
    page = rp.render_html(mixed_doc)
    assert "<h2>GPUs per path and pool</h2>" in page
    assert '<td class="t">NVIDIA-H200</td><td class="t">dra</td><td>2</td><td>5</td>' in page


def test_the_json_report_carries_the_path_figures(mixed_doc: dict, tmp_path: Path) -> None:
    from gpufleet.commands._output import write_json

    out = tmp_path / "r.json"
    write_json(mixed_doc, str(out))
    doc = json.loads(out.read_text())
    assert doc["paths"]["cluster"][0]["utilization"] == 0.64
    assert [(r["pool"], r["path"], r["allocated"]) for r in doc["paths"]["pools"]] == [
        ("NVIDIA-A100", "device-plugin", 2),
        ("NVIDIA-H100", "device-plugin", 13),
        ("NVIDIA-H200", "device-plugin", 1),
        ("NVIDIA-H200", "dra", 2),
    ]


@pytest.fixture(scope="module")
def teams_doc() -> dict:
    """The fleet of tests/unit/report/test_teams.py: team vision in two namespaces, a
    namespace with no team, idle and leaked devices."""
    from tests.unit.report import test_teams as tt

    report = tt.build()
    report["meta"] = META
    return report


IDLE_LINE = (
    "idle GPUs by team (gpufleet.io/team): vision 2 devices 282.0 GiB, (no team) 1 device 10.0 GiB"
)
LEAKED_LINE = "leaked GPUs by team (gpufleet.io/team): vision 1 device 141.0 GiB"


def test_the_team_lines_answer_who_holds_idle_and_leaked_gpus(teams_doc: dict) -> None:
    assert rp.team_lines(teams_doc) == [IDLE_LINE, LEAKED_LINE]
    assert rp.team_lines({"cluster": {}}) == []  # a report written before the figures


def test_the_terminal_shows_the_teams(teams_doc: dict) -> None:
    console = Console(record=True, width=200)
    report_cmd.render_terminal(console, teams_doc)
    text = console.export_text()
    assert IDLE_LINE in text and LEAKED_LINE in text
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert "│ vision │ 3 │ 322.0 │ 2 │ 282.0 │ 1 │ 141.0 │ ml-dev, ml-train │" in rows
    assert "│ (no team) │ 1 │ 10.0 │ 1 │ 10.0 │ 0 │ 0.0 │ sandbox │" in rows


def test_markdown_html_and_json_have_the_teams(teams_doc: dict, tmp_path: Path) -> None:
    md = rp.render_markdown(teams_doc)
    assert "## Waste by team" in md and f"- {IDLE_LINE}" in md
    assert "| vision | 3 | 322.0 | 2 | 282.0 | 1 | 141.0 |" in md
    assert "| ml-dev | vision | 2 | 181.0 | 1 | 141.0 | 1 | 141.0 |" in md
    page = rp.render_html(teams_doc)
    assert f"<li>{IDLE_LINE}</li>" in page
    assert '<td class="t">sandbox</td><td class="t">(no team)</td><td>1</td>' in page
    ET.fromstring(page.split("<body>", 1)[1].split("</body>")[0].join(["<b>", "</b>"]))
    from gpufleet.commands._output import write_json

    out = tmp_path / "r.json"
    write_json(teams_doc, str(out))
    team = json.loads(out.read_text())["teams"]["teams"][0]
    assert (team["team"], team["memory_idle"], team["namespaces"]) == (
        "vision",
        282 * 2**30,
        ["ml-dev", "ml-train"],
    )


def test_team_names_are_escaped_in_every_page(teams_doc: dict) -> None:
    doc = json.loads(json.dumps(teams_doc))
    doc["teams"]["teams"][0]["team"] = "[red]<b>x|y</b>"
    page = rp.render_html(doc)
    assert "<b>x|y</b>" not in page and "&lt;b&gt;x|y&lt;/b&gt;" in page
    md = rp.render_markdown(doc)
    assert "| [red]&lt;b&gt;x\\|y&lt;/b&gt; | 3 |" in md
    console = Console(record=True, width=200)
    report_cmd.render_terminal(console, doc)
    assert "[red]<b>x|y</b>" in console.export_text()


def test_without_activity_idle_is_shown_as_not_measured() -> None:
    from tests.unit.report import test_teams as tt

    doc = tt.build(activity=None)
    assert rp.team_lines(doc)[0] == (
        "idle GPUs by team (gpufleet.io/team): not measured (--prometheus)"
    )
    assert "| vision | 3 | 322.0 | - | - | 1 | 141.0 |" in rp.render_markdown({**doc, "meta": META})


@pytest.mark.parametrize("bad", ["team label", "-team", "a/b/c", "x" * 64, ""])
def test_a_team_label_that_is_not_a_label_key_is_refused(bad: str) -> None:
    result = CliRunner().invoke(main, ["report", "--team-label", bad])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "'--team-label'" in text and repr(bad) in text and "fix:" in text


def test_each_scrape_sums_the_teams_with_the_activity(monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as cl

    from gpufleet.commands import report_serve as rs
    from tests.unit.report import test_teams as tt

    listing = cl.Listing(resource_version="v1", nodes=tt.NODES, pods=tt.PODS)
    listing.slices, listing.claims, listing.namespaces = tt.SLICES, tt.CLAIMS, tt.NAMESPACES
    kube = SimpleNamespace(server="https://10.0.0.1:6443", requests=7)
    monkeypatch.setattr(rs.vk, "Kube", lambda *_: kube)
    monkeypatch.setattr(rs.cluster_listing, "list_cluster", lambda *_a, **_k: listing)
    monkeypatch.setattr(rs.fa, "fetch", lambda *_: dict(tt.ACTIVITY))
    status, text = rs.scrape(None, None, fr.DEFAULT_POOL_LABEL, prometheus="http://p:9090")
    assert status == 200
    assert f'gpufleet_team_idle_gpu_memory_bytes{{team="vision"}} {282 * 2**30}' in text

    def down(*_: object) -> dict:
        raise rs.fa.ActivityError("http://p:9090 does not answer")

    monkeypatch.setattr(rs.fa, "fetch", down)
    status, text = rs.scrape(None, None, fr.DEFAULT_POOL_LABEL, prometheus="http://p:9090")
    assert status == 200 and text.startswith("# idle not measured: http://p:9090 does not")
    assert "gpufleet_team_idle_gpu_memory_bytes{" not in text
    assert 'gpufleet_team_leaked_devices{team="vision"} 1' in text


@pytest.fixture(scope="module")
def counters_doc() -> dict:
    from tests.unit.report.test_fleet import counters_fleet

    report = counters_fleet()
    report["meta"] = META
    return report


def test_every_format_shows_the_gpus_with_shared_counters(counters_doc: dict) -> None:
    line = (
        "GPUs with shared counters (dynamic MIG): 2, memory slices 1 of 16 free, 1 stranded "
        "(17.5 GiB), multiprocessors 38 of 258 free, 38 stranded"
    )
    console = Console(record=True, width=250)
    report_cmd.render_terminal(console, counters_doc)
    text = console.export_text()
    assert "GPUs with shared counters (dynamic MIG)" in text and line in text
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert any(
        r.startswith("│ h200-node │ gpu-0 │ NVIDIA H200 │ 1/8: 7 │ 7 │ 17.5 │ 20/132 │ 20 │ none │")
        for r in rows
    )
    md = rp.render_markdown(counters_doc)
    assert "## GPUs with shared counters (dynamic MIG)" in md and f"- {line}" in md
    assert (
        "| b200-node | gpu-0 | NVIDIA B200 | 0/8: none | 0 | 0.0 | 18/126 | 18 | none | "
        "default/left, default/right |"
    ) in md
    page = rp.render_html(counters_doc)
    assert "<h2>GPUs with shared counters (dynamic MIG)</h2>" in page
    assert '<td class="t">1/8: 7</td><td class="t">7</td><td class="t">17.5</td>' in page
    assert json.loads(json.dumps(counters_doc))["gpus"][1]["memory_slices_stranded"] == [7]


def test_a_report_without_shared_counters_has_no_section(doc: dict) -> None:
    assert "shared counters" not in rp.render_markdown(doc)
    assert "shared counters" not in rp.render_html(doc)
    assert rp.counter_lines({"cluster": {}}) == []  # a report written before the figures


def test_every_format_counts_a_dynamic_gpus_free_devices_and_memory_from_its_counters(
    counters_doc: dict, tmp_path: Path
) -> None:
    from gpufleet.commands._output import write_json

    c, gpus = counters_doc["cluster"], counters_doc["gpus"]
    # the fleet's GPUs are all held: no placement fits, the rest are blocked, and the free
    # memory is what the counters have left, counted once per GPU
    assert c["devices_free"] == 0
    assert c["devices_blocked"] == c["devices_published"] - c["devices_allocated"] > 0
    assert c["memory_free"] == sum(g["memory_free"] for g in gpus) > 0
    assert c["memory_published"] == sum(g["memory"] for g in gpus)
    devices = (
        f"{c['devices_published']} devices published on 2 node(s), {c['devices_allocated']} "
        f"allocated, 0 free, {c['devices_blocked']} blocked by shared counters"
    )
    memory = (
        f"GPU memory: {rp.gib(c['memory_published'])} GiB published, "
        f"{rp.gib(c['memory_allocated'])} GiB allocated, {rp.gib(c['memory_free'])} GiB free"
    )
    console = Console(record=True, width=250)
    report_cmd.render_terminal(console, counters_doc)
    text = console.export_text()
    md, page = rp.render_markdown(counters_doc), rp.render_html(counters_doc)
    for shown in (text, md, page):
        assert devices in shown and memory in shown
    out = tmp_path / "r.json"
    write_json(counters_doc, str(out))
    cluster = json.loads(out.read_text())["cluster"]
    assert (cluster["devices_free"], cluster["devices_blocked"]) == (0, c["devices_blocked"])
    assert (cluster["memory_free"], cluster["memory_published"]) == (
        c["memory_free"],
        c["memory_published"],
    )


def test_the_report_is_built_with_the_garbage_collector_paused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import gc

    from ansible_collections.gpufleet.cluster.plugins.module_utils.cluster import listing as cl

    listing = cl.Listing(resource_version="v1", nodes=NODES, pods=PODS)
    listing.slices, listing.claims = SLICES, CLAIMS
    kube = SimpleNamespace(server="https://10.0.0.1:6443", requests=5)
    monkeypatch.setattr(report_cmd, "read_cluster", lambda *_a, **_k: (kube, listing))
    collecting = []
    build = fr.build_report

    def spy(*args: object, **kwargs: object) -> dict:
        collecting.append(gc.isenabled())
        return build(*args, **kwargs)

    monkeypatch.setattr(report_cmd.fr, "build_report", spy)
    result = CliRunner().invoke(main, ["report", "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert collecting == [False] and gc.isenabled()
