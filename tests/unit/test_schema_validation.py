"""Schema validation: the compiled validator only says whether a document matches; every message
(file, key path, wording) is still jsonschema's, through the fast path too."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.run_folders import iperf3_pair_steps, write_iperf3_try, write_run_json, write_step

from gpuval.judgement import RunJudgement
from gpuval.pipeline import judge
from gpuval.report.results_json import results_document, results_json
from gpuval.runfolder import read_run_folder
from gpuval.schemas.validation import SchemaError, schema_problems, validate, validator

SAMPLE_RUN = Path(__file__).parents[1] / "data" / "sample-run"


def test_an_invalid_sidecar_is_named_with_its_file_and_key_path(tmp_path: Path) -> None:
    write_step(tmp_path, "n1", "topo", "text", exit_code="0", env={"CUDA_VISIBLE_DEVICES": 0})
    folder = read_run_folder(tmp_path)
    assert sorted(
        (d.source, d.message) for d in folder.diagnostics if d.message.startswith("sidecar")
    ) == [
        (
            "raw/n1/topo.meta.json",
            "sidecar does not match sidecar.schema.json at env/CUDA_VISIBLE_DEVICES: "
            "0 is not of type 'string'",
        ),
        (
            "raw/n1/topo.meta.json",
            "sidecar does not match sidecar.schema.json at exit_code: "
            "'0' is not of type 'integer', 'null'",
        ),
    ]


@pytest.fixture(scope="module")
def sample_judgement() -> RunJudgement:
    return judge(SAMPLE_RUN, generated_at="2026-01-01T00:00:00Z")


@pytest.fixture(scope="module")
def sample_results(sample_judgement: RunJudgement) -> dict[str, Any]:
    return results_document(sample_judgement)


def test_the_sample_run_results_match_their_schema(sample_results: dict[str, Any]) -> None:
    assert schema_problems(sample_results, "results") == []


def test_a_broken_results_entry_is_named_by_its_key_path_however_far_in_the_list(
    sample_results: dict[str, Any],
) -> None:
    # Over 20 files of each tool (once the sample validated), the last one broken.
    document = copy.deepcopy(sample_results)
    document["files"] = [copy.deepcopy(entry) for entry in document["files"] * 6]
    last = len(document["files"]) - 1
    document["files"][last]["host"] = 7
    with pytest.raises(SchemaError) as raised:
        validate(document, "results")
    assert str(raised.value) == (
        f"results: 1 violation(s):\n  files/{last}/host: 7 is not of type 'string'"
    )


def test_results_json_refuses_a_document_its_schema_refuses(
    sample_judgement: RunJudgement, sample_results: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = {**sample_results, "verdict": "maybe"}
    monkeypatch.setattr("gpuval.report.results_json.results_document", lambda _: broken)
    with pytest.raises(SchemaError, match=r"verdict: 'maybe' is not one of"):
        results_json(sample_judgement)


@pytest.fixture(scope="module")
def pair_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """results.json of three hosts' iperf3 pairs at 14.5 Gbit/s: every pair table has rows."""
    run = tmp_path_factory.mktemp("pairs")
    hosts = ["n1", "n2", "n3"]
    expected: dict[str, list[str]] = {host: [] for host in hosts}
    for client, src, dst, name in iperf3_pair_steps(hosts):
        expected[client].append(name)
        write_iperf3_try(run, client, name, dst if src == client else src, 14.5, src != client)
    write_run_json(run, "pairs", hosts, expected=expected)
    return results_document(judge(run, generated_at="2026-01-01T00:00:00Z"))


def test_the_pair_tables_kept_in_their_own_schema_file_match(
    pair_results: dict[str, Any],
) -> None:
    assert all(pair_results["pairs"][table] for table in ("tries", "pairs", "nodes"))
    assert schema_problems(pair_results, "results") == []


@pytest.mark.parametrize(
    ("table", "key", "value", "message"),
    [
        # pair_kind, defined in results-pairs.schema.json
        ("nodes", "kind", "bogus", "'bogus' is not one of ['iperf3', 'allreduce', 'nccl', 'rdma']"),
        # status, which results-pairs.schema.json takes from results.schema.json
        ("pairs", "status", "maybe", "'maybe' is not one of"),
        ("tries", "round", -1, "-1 is less than the minimum of 0"),
    ],
)
def test_a_pair_row_its_own_schema_file_refuses_is_refused_by_both_validators(
    pair_results: dict[str, Any], table: str, key: str, value: Any, message: str
) -> None:
    document = copy.deepcopy(pair_results)
    document["pairs"][table][0][key] = value
    path = f"pairs/{table}/0/{key}"
    with pytest.raises(SchemaError, match=f"^results: 1 violation\\(s\\):\n  {path}: "):
        validate(document, "results")
    (slow_path,) = validator("results").iter_errors(document)
    assert slow_path.message.startswith(message)


# JSON values as json.loads gives them (NaN and infinities too: against `minimum` the compiled
# validator is stricter than jsonschema, which then decides), and values the sidecar schema takes.
_sidecar_values = st.sampled_from(
    [
        None,
        0,
        1,
        2.5,
        True,
        "n1",
        "preflight",
        {},
        {"CUDA_VISIBLE_DEVICES": "0"},
        math.nan,
        math.inf,
    ]
)
_json = _sidecar_values | st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    changes=st.dictionaries(
        st.sampled_from([*sorted(validator("sidecar").schema["properties"]), "x"]),
        _json,
        max_size=2,
    ),
    dropped=st.sampled_from([(), (), (), ("name",), ("exit_code",)]),
)
def test_the_fast_path_gives_exactly_jsonschemas_errors(
    changes: dict[str, Any], dropped: tuple[str, ...]
) -> None:
    document = {
        "schema_version": 1, "name": "topo", "host": "n1", "phase": "preflight", "raw": "t.txt",
        "command": "c", "exit_code": 0, **changes,
    }  # fmt: skip
    for key in dropped:
        document.pop(key, None)
    expected = [
        (list(e.absolute_path), e.message) for e in validator("sidecar").iter_errors(document)
    ]
    assert [
        (list(e.absolute_path), e.message) for e in schema_problems(document, "sidecar")
    ] == expected
