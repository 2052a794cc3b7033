"""Load and chaos testing of MCP servers: ``mcp-actors stress`` as a library.

Build a :class:`StressSettings` (a target record from :func:`adhoc_target` or
:func:`configured_target`, a :class:`Scenario`, a :class:`LoadPlan`), run it with
:func:`run_stress`, and get one result document (schema ``mcp-actors/stress-result/1``)
that embeds its exact HDR histograms, so :func:`merge_documents` combines runs made on
several machines exactly. See ``docs/stress.md``.
"""

from mcp_actors.stress._engine import Executor as Executor
from mcp_actors.stress._engine import LoadPlan as LoadPlan
from mcp_actors.stress._engine import drive as drive
from mcp_actors.stress._parse import ChaosKind as ChaosKind
from mcp_actors.stress._parse import ChaosSpec as ChaosSpec
from mcp_actors.stress._parse import RateStep as RateStep
from mcp_actors.stress._parse import Slo as Slo
from mcp_actors.stress._parse import parse_chaos as parse_chaos
from mcp_actors.stress._parse import parse_duration as parse_duration
from mcp_actors.stress._parse import parse_rate as parse_rate
from mcp_actors.stress._parse import parse_slo as parse_slo
from mcp_actors.stress._report import render_csv as render_csv
from mcp_actors.stress._report import render_html as render_html
from mcp_actors.stress._result import SCHEMA as SCHEMA
from mcp_actors.stress._result import build_document as build_document
from mcp_actors.stress._result import compare_documents as compare_documents
from mcp_actors.stress._result import evaluate_slos as evaluate_slos
from mcp_actors.stress._result import load_document as load_document
from mcp_actors.stress._result import merge_documents as merge_documents
from mcp_actors.stress._run import LiveStats as LiveStats
from mcp_actors.stress._run import StressSettings as StressSettings
from mcp_actors.stress._run import adhoc_target as adhoc_target
from mcp_actors.stress._run import configured_target as configured_target
from mcp_actors.stress._run import run_stress as run_stress
from mcp_actors.stress._scenario import Expectation as Expectation
from mcp_actors.stress._scenario import Operation as Operation
from mcp_actors.stress._scenario import OpKind as OpKind
from mcp_actors.stress._scenario import Scenario as Scenario
from mcp_actors.stress._scenario import load_scenario as load_scenario
from mcp_actors.stress._scenario import scenario_from_dict as scenario_from_dict
from mcp_actors.stress._scenario import single_tool as single_tool
from mcp_actors.stress._schedule import RateSchedule as RateSchedule
from mcp_actors.stress._tally import Histogram as Histogram
from mcp_actors.stress._tally import Tally as Tally

__all__ = [
    "ChaosKind",
    "ChaosSpec",
    "Executor",
    "Expectation",
    "Histogram",
    "LiveStats",
    "LoadPlan",
    "OpKind",
    "Operation",
    "RateSchedule",
    "RateStep",
    "SCHEMA",
    "Scenario",
    "Slo",
    "StressSettings",
    "Tally",
    "adhoc_target",
    "build_document",
    "compare_documents",
    "configured_target",
    "drive",
    "evaluate_slos",
    "load_document",
    "load_scenario",
    "merge_documents",
    "parse_chaos",
    "parse_duration",
    "parse_rate",
    "parse_slo",
    "render_csv",
    "render_html",
    "run_stress",
    "scenario_from_dict",
    "single_tool",
]
