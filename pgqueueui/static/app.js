// pgqueueui: refreshes the overview's live part in place. The fragment is
// rendered and escaped by the server; this file is the page's only script
// (the Content-Security-Policy allows no inline one).
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var url = live.getAttribute("data-refresh");
  var every = parseInt(live.getAttribute("data-interval"), 10) || 2000;
  var status = document.getElementById("refresh-status");
  var count = 0;
  // The next refresh waits at least five times as long as this one took,
  // so a slow overview (a large backlog to count) costs an open tab at
  // most a sixth of a database core.
  var delay = every;
  function tick() {
    var started = Date.now();
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        count++;
        live.setAttribute("data-refreshed", String(count));
        if (status) { status.textContent = "Live: refreshed every " + Math.round(delay / 100) / 10 + "s."; }
      })
      .catch(function (err) {
        if (status) { status.textContent = "Refresh failed (" + err.message + "); retrying."; }
      })
      .then(function () {
        delay = Math.max(every, 5 * (Date.now() - started));
        setTimeout(tick, delay);
      });
  }
  setTimeout(tick, every);
}());
