// Trajectory viewer of the SpeedRunner report. Reads the JSON embedded in
// <script id="report-data">, builds the DOM with textContent only (run files are
// untrusted text: nothing from them is parsed as HTML), and needs no network.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var runSelect = document.getElementById("run-select");
  var episodeSelect = document.getElementById("episode-select");
  var view = document.getElementById("episode-view");

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function money(x) {
    return x === null || x === undefined ? "unknown" : "$" + Number(x).toFixed(6);
  }

  function callText(call) {
    var parts = (call.args || []).map(function (a) { return JSON.stringify(a); });
    var kw = call.kwargs || {};
    Object.keys(kw).forEach(function (k) { parts.push(k + "=" + JSON.stringify(kw[k])); });
    return call.name + "(" + parts.join(", ") + ")";
  }

  function skillTree(call, depth) {
    var box = el("details", "skill-call");
    box.dataset.depth = String(depth);
    var outcome;
    if (call.stopped_by && call.stopped_by !== "returned" && call.stopped_by !== "error") {
      outcome = "stopped: " + call.stopped_by;
    } else if (call.error) {
      var lines = String(call.error).trim().split("\n");
      outcome = "error: " + lines[lines.length - 1];
    } else {
      outcome = "returned " + JSON.stringify(call.returned);
    }
    var nActions = (call.actions || []).length;
    box.appendChild(el("summary", call.error ? "skill-summary failed" : "skill-summary",
      callText(call) + " \u2192 " + outcome + " (" + nActions + " own action" + (nActions === 1 ? "" : "s") +
      ", " + (call.calls || []).length + " nested call" + ((call.calls || []).length === 1 ? "" : "s") + ")"));
    (call.calls || []).forEach(function (child) { box.appendChild(skillTree(child, depth + 1)); });
    if (nActions) {
      var list = el("ol", "primitive-actions");
      call.actions.forEach(function (a) {
        var item = el("li", "primitive-action");
        item.appendChild(el("code", null, a.action));
        if (a.error) item.appendChild(el("span", "feedback", " refused: " + a.error));
        if (a.text) item.appendChild(el("pre", "obs small", a.text));
        list.appendChild(item);
      });
      box.appendChild(list);
    }
    if (call.prints) box.appendChild(el("pre", "prints", "printed: " + call.prints));
    if (call.error) box.appendChild(el("pre", "error", call.error));
    return box;
  }

  function turn(step) {
    var box = el("div", "turn");
    var head = el("div", "turn-head", "Turn " + step.index + " \u00b7 cost " + money(step.cost_usd) +
      " \u00b7 tokens in " + (step.usage.input_uncached + step.usage.input_cached) +
      " (cached " + step.usage.input_cached + "), out " + step.usage.output + (step.cached ? " \u00b7 from cache" : ""));
    box.appendChild(head);
    box.appendChild(el("div", "label", "Observation"));
    box.appendChild(el("pre", "obs", step.observation));
    box.appendChild(el("div", "label", "Thought"));
    box.appendChild(el("div", "thought", step.thought || "(none)"));
    var action = el("div", "action");
    action.appendChild(el("span", "label", "Action: "));
    action.appendChild(el("code", null, step.parsed_action === null ? step.raw_action || "(none)" : step.parsed_action));
    box.appendChild(action);
    if (step.error) box.appendChild(el("div", "feedback", (step.parsed_action === null ? "Invalid action: " : "Error: ") + step.error));
    if (step.raw_text) {
      var raw = el("details", "raw-answer");
      raw.appendChild(el("summary", null, "the answer verbatim"));
      raw.appendChild(el("pre", "obs", step.raw_text));
      box.appendChild(raw);
    }
    if (step.skill_call) {
      box.appendChild(el("div", "label", "Skill call (" + step.executed.length + " primitive actions in all)"));
      box.appendChild(skillTree(step.skill_call, 0));
    } else if (step.executed && step.executed.length && step.executed[0] !== step.parsed_action) {
      box.appendChild(el("div", "executed", "executed: " + step.executed.join(", ")));
    }
    return box;
  }

  function episodeLabel(ep) {
    var where = ep.split === "eval" ? "eval@" + ep.eval_point + " #" + ep.index : "train #" + ep.index;
    return where + " \u00b7 " + (ep.success ? "success" : "failure") + " \u00b7 " + ep.llm_calls + " LLM calls";
  }

  function showEpisode() {
    var run = data.runs[Number(runSelect.value)];
    var ep = run.episodes[Number(episodeSelect.value)];
    view.replaceChildren();
    if (!ep) { view.appendChild(el("p", null, "This run has no stored episode yet.")); return; }
    view.appendChild(el("h3", "episode-title", episodeLabel(ep)));
    if (run.scripted) view.appendChild(el("p", "scripted-note", "SCRIPTED run: no LLM wrote these turns."));
    view.appendChild(el("p", "instruction", ep.instruction));
    view.appendChild(el("p", "meta", "task " + ep.task + " \u00b7 seed " + ep.seed + " \u00b7 knowledge v" +
      ep.knowledge_version + " \u00b7 progress " + ep.progress + " \u00b7 stopped by " + ep.stop_reason +
      " \u00b7 " + ep.env_actions + " env actions \u00b7 cost " + money(ep.cost_usd)));
    ep.steps.forEach(function (s) { view.appendChild(turn(s)); });
    if (ep.final_observation) {
      view.appendChild(el("div", "label", "Final observation"));
      view.appendChild(el("pre", "obs", ep.final_observation));
    }
  }

  function fillEpisodes() {
    var run = data.runs[Number(runSelect.value)];
    episodeSelect.replaceChildren();
    run.episodes.forEach(function (ep, i) {
      var option = el("option", null, episodeLabel(ep));
      option.value = String(i);
      episodeSelect.appendChild(option);
    });
    var note = document.getElementById("episode-note");
    note.textContent = run.omitted ? run.omitted + " episodes not embedded (see the run directory)" : "";
    showEpisode();
  }

  function step(delta) {
    var n = episodeSelect.options.length;
    if (!n) return;
    episodeSelect.value = String((Number(episodeSelect.value) + delta + n) % n);
    showEpisode();
  }

  data.runs.forEach(function (run, i) {
    var option = el("option", null, run.label);
    option.value = String(i);
    runSelect.appendChild(option);
  });
  runSelect.addEventListener("change", fillEpisodes);
  episodeSelect.addEventListener("change", showEpisode);
  document.getElementById("prev-episode").addEventListener("click", function () { step(-1); });
  document.getElementById("next-episode").addEventListener("click", function () { step(1); });
  if (data.runs.length) fillEpisodes();
})();
