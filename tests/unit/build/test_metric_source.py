"""The Go metric definition reader (gpufleet/build/metric_source.py) on the shapes the
Kubernetes source uses (options literals, descriptors, constants, BuildFQName)."""

from __future__ import annotations

import pytest

from gpufleet.build import metric_source as m

pytestmark = pytest.mark.unit

SOURCE = """package metrics

// Sub - the subsystem
const Sub = "resourceclaim_controller"

const (
	DRASubsystem = "dra"
	DurationKey  = "operations_duration_seconds"
	Derived      = DRASubsystem + "_x"
)

var (
	// Old = metrics.NewCounter(&metrics.CounterOpts{Name: "commented_out_total"})
	Create = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Subsystem:      Sub,
			Name:           "creates_total",
			Help:           "Number of creations, by status {a, b}",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"status", "admin_access"},
	)
	Duration = metrics.NewHistogramVec(
		&metrics.HistogramOpts{
			Subsystem: DRASubsystem,
			Name:      DurationKey,
			Buckets:   []float64{0.1, 1},
		},
		[]string{"operation_name", "is_error"},
	)
	Feature = k8smetrics.NewGauge(&k8smetrics.GaugeOpts{
		Namespace: "kubernetes", Name: "feature_enabled"})
	/* Gone = metrics.NewDesc("block_commented", "", nil, nil, metrics.ALPHA, "") */
	InUse = metrics.NewDesc(DRASubsystem+"_resource_claims_in_use", "help, with a comma",
		[]string{"driver_name"}, nil, metrics.ALPHA, "")
	Claims = metrics.NewDesc(
		metrics.BuildFQName("", Sub, "resource_claims"),
		"Number " +
			"of claims",
		[]string{"allocated", "admin_access", "source"}, nil,
		metrics.ALPHA, "")
	Plain = compbasemetrics.NewDesc("apiserver_resource_objects", "h",
		[]string{"group", "resource"}, nil, compbasemetrics.ALPHA, "")
	Derive = metrics.NewDesc(Derived, "h", nil, nil, metrics.ALPHA, "")
)
"""


def test_every_shape_is_read_with_its_labels_and_kind() -> None:
    found = m.extract(SOURCE)
    assert found.unresolved == ()
    assert [(d.name, d.labels, d.kind) for d in found.series] == [
        ("resourceclaim_controller_creates_total", ("status", "admin_access"), "counter"),
        ("dra_operations_duration_seconds", ("operation_name", "is_error"), "histogram"),
        ("kubernetes_feature_enabled", (), "gauge"),
        ("dra_resource_claims_in_use", ("driver_name",), None),
        ("resourceclaim_controller_resource_claims", ("allocated", "admin_access", "source"), None),
        ("apiserver_resource_objects", ("group", "resource"), None),
        ("dra_x", (), None),
    ]


def test_commented_definitions_are_not_series() -> None:
    names = m.extract(SOURCE).names()
    assert "commented_out_total" not in names and "block_commented" not in names


def test_a_name_from_another_package_is_reported_not_guessed() -> None:
    text = """var X = metrics.NewCounter(&metrics.CounterOpts{Subsystem: other.Sub, Name: "n"})
var Y = metrics.NewDesc(other.Name, "h", nil, nil, metrics.ALPHA, "")
"""
    found = m.extract(text)
    assert found.series == ()
    assert len(found.unresolved) == 2
    assert "other.Sub" in found.unresolved[0] and "other.Name" in found.unresolved[1]


def test_labels_that_are_not_a_literal_list_are_unknown() -> None:
    text = 'var X = metrics.NewGaugeVec(&metrics.GaugeOpts{Name: "g"}, labelNames)\n'
    assert m.extract(text).series[0].labels is None


@pytest.mark.parametrize(
    ("parts", "name"),
    [
        (("", "dra", "x"), "dra_x"),
        (("k", "", "x"), "k_x"),
        (("k", "s", ""), ""),
        (("", "", "x"), "x"),
    ],
)
def test_full_name_joins_like_build_fq_name(parts: tuple[str, str, str], name: str) -> None:
    assert m.full_name(*parts) == name


def test_strings_keep_comment_markers() -> None:
    text = (
        'const U = "http://x/*y*/"\nvar X = metrics.NewDesc(U, "", nil, nil, metrics.ALPHA, "")\n'
    )
    assert m.extract(text).names() == {"http://x/*y*/"}


@pytest.mark.parametrize(
    "text",
    [
        'var X = metrics.NewCounter(&metrics.CounterOpts{Name: "n"',
        'var X = metrics.NewDesc("n", "h", []string{"a"',
        'var X = metrics.NewGaugeVec(&metrics.GaugeOpts{Name: "g"}, []string{"a", "b"',
        'var X = metrics.NewDesc("unterminated, nil)',
    ],
    ids=["opts", "desc", "labels", "string"],
)
def test_a_cut_off_definition_is_reported_not_a_crash(text: str) -> None:
    found = m.extract(text)
    assert found.series == ()
    assert len(found.unresolved) == 1 and "unbalanced" in found.unresolved[0]
