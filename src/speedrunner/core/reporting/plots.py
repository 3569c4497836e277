"""The report's figures, PNG and SVG, drawn with matplotlib's object API.

``Figure`` without pyplot renders through Agg (PNG) and the SVG backend directly: no
display, no global backend switch, safe on headless machines and in threads.

Each experiment is one line: the mean over seeds with a ±1 s.d. band, ``n`` seeds in the
legend. A group with a run still in progress is dashed and says so in the legend; any
scripted run puts a red "SCRIPTED" banner on the figure, so a plot cut out of the report
still cannot be mistaken for an LLM result.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from speedrunner.core.atomic import atomic_write_bytes
from speedrunner.core.reporting.aggregate import CURVES, Group, Stat

SCRIPTED_BANNER = "SCRIPTED MODEL — not an LLM: these numbers say nothing about any LLM"
SVG_PARAMS = {
    "svg.hashsalt": "speedrunner-report",  # stable ids: the same runs give the same SVG
    "svg.fonttype": "none",
}  # text stays text: searchable, and the SCRIPTED banner checkable


@dataclass(frozen=True)
class Plot:
    name: str
    title: str
    png: Path
    svg: Path
    png_bytes: bytes
    wide: bool = False
    """Several panels side by side: shown full width."""
    empty: str | None = None
    """Why the figure shows nothing worth a slot ("all 0 in every run"): the report gives it
    one line."""

    @property
    def collapsed(self) -> str:
        return f"{self.title}: {self.empty}"


def emptiness(values: list[float]) -> str | None:
    """ "no value in any run" or "all 0 in every run" when a figure would show nothing, else
    None."""
    if not values:
        return "no value in any run"
    return "all 0 in every run" if all(v == 0 for v in values) else None


def group_color(group: Group) -> str:
    """One colour per experiment, the same in every figure (matplotlib's C0..C9 cycle)."""
    return f"C{group.index % 10}"


def _style(group: Group) -> dict:
    return {"linestyle": "--" if group.in_progress else "-", "marker": "o", "markersize": 3}


def _band(ax, group: Group, points: list[tuple[int, Stat]]) -> str | None:
    """Draw the mean line and its ±1 s.d. band; the line's colour (None: nothing to draw)."""
    if not points:
        return None
    xs = [x for x, _ in points]
    means = [s.mean for _, s in points]
    (line,) = ax.plot(xs, means, label=group.label, color=group_color(group), **_style(group))
    if any(s.sd is not None for _, s in points):
        lo = [s.mean - (s.sd or 0.0) for _, s in points]
        hi = [s.mean + (s.sd or 0.0) for _, s in points]
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2, linewidth=0)
    return line.get_color()


def _figure(title: str, groups: list[Group], ncols: int = 1) -> tuple[Figure, list]:
    fig = Figure(figsize=(5 * ncols if ncols > 1 else 8, 4.8), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0].tolist()
    partial = any(g.in_progress for g in groups)
    heading = title + ("  (partial: runs in progress are dashed or hollow)" if partial else "")
    if any(g.scripted for g in groups):
        fig.suptitle(
            f"{heading}\n{SCRIPTED_BANNER}", color="#b00020", fontsize=10, fontweight="bold"
        )
    else:
        fig.suptitle(heading, fontsize=11)
    return fig, axes


def _legend(fig: Figure, axes: list) -> None:
    handles, labels = [], []
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    if handles:
        fig.legend(handles, labels, loc="outside lower center", fontsize=7, ncols=1)


def _save(
    fig: Figure, out: Path, name: str, title: str, *, wide: bool = False, empty: str | None = None
) -> Plot:
    out.mkdir(parents=True, exist_ok=True)
    png, svg = io.BytesIO(), io.BytesIO()
    fig.savefig(png, format="png", dpi=110, metadata={"Software": None})
    with rc_context(SVG_PARAMS):
        fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    atomic_write_bytes(out / f"{name}.png", png.getvalue())
    atomic_write_bytes(out / f"{name}.svg", svg.getvalue())
    return Plot(name, title, out / f"{name}.png", out / f"{name}.svg", png.getvalue(), wide, empty)


def _from_zero(ax, axis: str = "y", note: str = "every value is 0") -> None:
    """Every quantity the report plots is >= 0: start its axis at 0, and when every value is 0
    (a scripted run's cost) show 0..1 with a note instead of matplotlib's symmetric -0.04..0.04."""
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    data = [
        v
        for line in ax.get_lines()
        for v in (line.get_ydata() if axis == "y" else line.get_xdata())
    ]
    top = max([hi, *data]) if data else hi
    flat = not data or max(abs(float(v)) for v in data) == 0
    limits = (0, 1) if flat else (0, top)
    (ax.set_ylim if axis == "y" else ax.set_xlim)(*limits)
    if flat and data:
        ax.text(0.5, 0.5, note, ha="center", va="center", transform=ax.transAxes, color="#555")


def _curve_plot(groups: list[Group], out: Path, curve: str, title: str) -> Plot:
    fig, (ax,) = _figure(title, groups)
    for g in groups:
        _band(ax, g, g.curves.get(curve, []))
    _from_zero(ax)
    ax.set_xlabel("training rollouts")
    ax.set_ylabel(CURVES[curve])
    ax.grid(alpha=0.3)
    _legend(fig, [ax])
    return _save(
        fig,
        out,
        curve,
        title,
        empty=emptiness([s.mean for g in groups for _, s in g.curves.get(curve, [])]),
    )


def _frontier_plot(groups: list[Group], out: Path) -> Plot:
    title = "Cost vs progress at the final evaluation"
    fig, (ax,) = _figure(title, groups)
    points = []
    for g in groups:
        cost, prog = (
            g.finals.get("final_eval_cost_per_episode"),
            g.finals.get("final_eval_progress"),
        )
        if cost is None or prog is None:
            continue
        ax.errorbar(
            [cost.mean],
            [prog.mean],
            xerr=[cost.sd or 0.0],
            yerr=[prog.sd or 0.0],
            fmt="o",
            capsize=3,
            label=g.label,
            color=group_color(g),
            mfc="none" if g.in_progress else None,
        )
        points.append((cost.mean, prog.mean))
    frontier, best = [], float("-inf")
    for c, p in sorted(points, key=lambda cp: (cp[0], -cp[1])):
        if p > best:  # cheaper-or-equal and better than everything cheaper: on the frontier
            frontier.append((c, p))
            best = p
    if len(frontier) > 1:
        ax.plot(
            *zip(*frontier, strict=True), color="grey", linewidth=1, linestyle=":", label="frontier"
        )
    if not points:
        ax.text(
            0.5,
            0.5,
            "no run with a known cost at an evaluation",
            ha="center",
            transform=ax.transAxes,
        )
    else:
        _from_zero(ax, "x", "every cost is 0")
    ax.set_xlabel("cost per evaluation episode, USD (final evaluation)")
    ax.set_ylabel("evaluation progress (final evaluation)")
    ax.grid(alpha=0.3)
    _legend(fig, [ax])
    return _save(
        fig,
        out,
        "frontier",
        title,
        empty=None if points else "no run with a known cost at an evaluation",
    )


def _knowledge_plot(groups: list[Group], out: Path) -> Plot:
    title = "Knowledge size per generation"
    fig, axes = _figure(title, groups, ncols=3)
    panels = [
        ("guide_chars", "guide characters"),
        ("public_functions", "codebook functions (— public, ·· private)"),
        ("lines", "codebook lines"),
    ]
    for ax, (metric, label) in zip(axes, panels, strict=True):
        for g in groups:
            points = [
                (gen, stats[metric]) for gen, stats in g.knowledge if stats[metric] is not None
            ]
            color = _band(ax, g, points)
            if metric == "public_functions" and color is not None:
                private = [
                    (gen, stats["private_functions"])
                    for gen, stats in g.knowledge
                    if stats["private_functions"] is not None
                ]
                if private:
                    xs, ys = [x for x, _ in private], [s.mean for _, s in private]
                    ax.plot(xs, ys, linestyle=":", marker="s", markersize=3, color=color)
        ax.set_xlabel("generation")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    sizes = [
        s.mean
        for g in groups
        for _, stats in g.knowledge
        for m, _label in panels
        if (s := stats[m]) is not None
    ]
    return _save(fig, out, "knowledge_size", title, wide=True, empty=emptiness(sizes))


def _generation_points(group: Group, metric: str) -> list[tuple[int, Stat]]:
    return [(gen, s[metric]) for gen, s in group.knowledge if s[metric] is not None]


def _skills_plot(groups: list[Group], out: Path) -> Plot:
    title = "Skills: calls per episode, actions per call, call-graph density and depth"
    fig, axes = _figure(title, groups, ncols=4)
    for g in groups:
        _band(axes[0], g, g.curves.get("skill_calls_per_episode", []))
        _band(axes[1], g, g.curves.get("actions_per_skill_call", []))
        _band(axes[2], g, _generation_points(g, "call_graph_density"))
        color = _band(axes[3], g, _generation_points(g, "max_call_depth"))
        dynamic = _generation_points(g, "dynamic_max_call_depth")
        if dynamic:
            axes[3].plot(
                [x for x, _ in dynamic],
                [s.mean for _, s in dynamic],
                linestyle=":",
                marker="s",
                markersize=3,
                color=color or group_color(g),
            )
    for ax, curve in zip(
        axes[:2], ("skill_calls_per_episode", "actions_per_skill_call"), strict=True
    ):
        ax.set_xlabel("training rollouts")
        ax.set_ylabel(CURVES[curve])
    axes[2].set_ylabel("call-graph density |E|/(|V|(|V|-1))")
    axes[3].set_ylabel("max call depth (— static, ·· recorded)")
    for ax in axes[2:]:
        ax.set_xlabel("generation")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes:
        ax.grid(alpha=0.3)
    _legend(fig, axes)
    values = [
        s.mean
        for g in groups
        for c in ("skill_calls_per_episode", "actions_per_skill_call")
        for _, s in g.curves.get(c, [])
    ]
    values += [
        s.mean
        for g in groups
        for m in ("call_graph_density", "max_call_depth", "dynamic_max_call_depth")
        for _, s in _generation_points(g, m)
    ]
    return _save(fig, out, "skills", title, wide=True, empty=emptiness(values))


def _api_tokens_plot(groups: list[Group], out: Path) -> Plot:
    title = "Skill API tokens in every actor prompt, per generation (estimated)"
    fig, (ax,) = _figure(title, groups)
    drawn = [_band(ax, g, _generation_points(g, "skill_api_tokens")) for g in groups]
    if not any(drawn):
        ax.text(
            0.5,
            0.5,
            "no run records skill_api_tokens (no codebook method among them)",
            ha="center",
            transform=ax.transAxes,
        )
    ax.set_xlabel("generation")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("tokens of the skills section of the actor's first message")
    ax.grid(alpha=0.3)
    _legend(fig, [ax])
    tokens = [s.mean for g in groups for _, s in _generation_points(g, "skill_api_tokens")]
    return _save(fig, out, "skill_api_tokens", title, empty=emptiness(tokens))


def draw_all(groups: list[Group], out: Path) -> list[Plot]:
    """Every figure the issue lists; the skill figure only when a skill method is present."""
    plots = [
        _curve_plot(groups, out, "eval_progress", "Evaluation progress vs training rollouts"),
        _curve_plot(
            groups,
            out,
            "cost_per_episode",
            "Cost per episode vs rollouts (actor + amortised sleep)",
        ),
        _curve_plot(
            groups, out, "output_tokens_per_episode", "Output tokens per episode vs rollouts"
        ),
        _curve_plot(
            groups, out, "llm_calls_per_episode", "Actor LLM calls per episode vs rollouts"
        ),
        _curve_plot(
            groups,
            out,
            "llm_calls_amortised_per_episode",
            "LLM calls per episode vs rollouts (actor + amortised sleep)",
        ),
        _curve_plot(
            groups, out, "within_2_llm_calls_share", "Training episodes finished in <= 2 LLM calls"
        ),
        _frontier_plot(groups, out),
        _knowledge_plot(groups, out),
    ]
    skill_groups = [g for g in groups if g.skill_method]
    if skill_groups:
        plots += [_skills_plot(skill_groups, out), _api_tokens_plot(skill_groups, out)]
    return plots
