"""Voyager on Crafter: the method with Crafter's tasks (its 22 achievements, in BALROG's
order, phrased as tasks: "collect wood", "make wood pickaxe", ...)."""

from __future__ import annotations

from speedrunner.benchmarks.crafter.env import INSTRUCTION
from speedrunner.benchmarks.crafter.text import ACHIEVEMENT_ORDER
from speedrunner.core.method import MethodContext
from speedrunner.methods.voyager.config import VoyagerConfig
from speedrunner.methods.voyager.voyager import VoyagerMethod, VoyagerWorld

CRAFTER_WORLD = VoyagerWorld(
    achievements=ACHIEVEMENT_ORDER, first_task="collect wood", eval_query=INSTRUCTION
)


def make_voyager(config: VoyagerConfig, ctx: MethodContext) -> VoyagerMethod:
    return VoyagerMethod(config, ctx, CRAFTER_WORLD)
