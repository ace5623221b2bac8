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
  function tick() {
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        count++;
        live.setAttribute("data-refreshed", String(count));
        if (status) { status.textContent = "Live: refreshed every " + every / 1000 + "s."; }
      })
      .catch(function (err) {
        if (status) { status.textContent = "Refresh failed (" + err.message + "); retrying."; }
      })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
}());
