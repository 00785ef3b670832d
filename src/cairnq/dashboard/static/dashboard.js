// cairnq dashboard: refreshes the live parts of a page in place by short polling.
// The server renders the parts (same URL, header X-Cairnq-Live: 1); this script
// swaps each [data-live-part] for its fresh copy when it changed, and stops once
// a part marked data-final arrives (a finished task). No dependencies.
(function () {
  "use strict";
  var KEY = "cairnq.live";
  var main = document.querySelector("main[data-refresh]");
  var toggle = document.getElementById("live-toggle");
  var enabled = true;
  try { enabled = window.localStorage.getItem(KEY) !== "off"; } catch (e) { /* storage blocked */ }

  function show() {
    if (!toggle) return;
    toggle.setAttribute("aria-pressed", enabled ? "true" : "false");
    toggle.title = enabled ? "live updates on: click to pause" : "live updates paused: click to resume";
  }
  show();
  if (toggle) {
    toggle.addEventListener("click", function () {
      enabled = !enabled;
      try { window.localStorage.setItem(KEY, enabled ? "on" : "off"); } catch (e) { /* ignore */ }
      show();
      if (enabled && main) schedule(0);
    });
  }
  if (!main) return;

  var interval = parseInt(main.getAttribute("data-refresh") || "2000", 10);
  var timer = null;
  var busy = false;
  var failures = 0;

  function schedule(delay) {
    if (timer !== null) window.clearTimeout(timer);
    timer = window.setTimeout(tick, delay);
  }

  function apply(text) {
    var fresh = new DOMParser().parseFromString(text, "text/html");
    var parts = fresh.querySelectorAll("[data-live-part]");
    for (var i = 0; i < parts.length; i++) {
      var name = parts[i].getAttribute("data-live-part");
      var target = document.querySelector('[data-live-part="' + CSS.escape(name) + '"]');
      if (target && target.innerHTML !== parts[i].innerHTML) {
        target.innerHTML = parts[i].innerHTML;
      }
    }
    if (fresh.querySelector("[data-final]")) main.setAttribute("data-final", "");
  }

  function tick() {
    timer = null;
    if (!enabled || busy || main.hasAttribute("data-final")) return;
    if (document.hidden) { schedule(interval); return; }
    busy = true;
    fetch(window.location.href, {
      headers: { "X-Cairnq-Live": "1" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (response) {
      if (response.status === 401) { window.location.reload(); return null; }
      if (!response.ok && response.status !== 400) throw new Error("HTTP " + response.status);
      return response.text();
    }).then(function (text) {
      busy = false;
      failures = 0;
      if (text !== null) apply(text);
      schedule(interval);
    }).catch(function () {
      busy = false;
      failures += 1;
      schedule(Math.min(30000, interval * Math.pow(2, failures)));
    });
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden && enabled) schedule(0);
  });
  schedule(interval);
})();
