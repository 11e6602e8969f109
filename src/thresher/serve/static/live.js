// Live refresh of the dashboard and crawl pages, the one thing that needs JavaScript:
// pages are whole without it. The server sends a "change" event (Server-Sent Events,
// /api/events) when the store's runs, workers or crawls move; the page then fetches
// itself and swaps in the sections marked data-refresh. The markup comes from this
// server, escaped there like every page; nothing is built from strings here.
(function () {
  "use strict";
  var live = document.querySelector("[data-live]");
  if (!live || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var busy = false;
  var again = false;
  live.classList.add("on");

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-refresh]").forEach(function (old) {
          var next = old.id && fresh.getElementById(old.id);
          if (next) {
            old.replaceWith(document.importNode(next, true));
          }
        });
        var stamp = fresh.querySelector(".live time");
        var here = live.querySelector("time");
        if (stamp && here) {
          here.textContent = stamp.textContent;
        }
        live.classList.remove("stale");
      })
      .catch(function () {
        live.classList.add("stale");
      })
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var source = new EventSource(live.getAttribute("data-live"));
  source.addEventListener("change", refresh);
  source.addEventListener("error", function () {
    live.classList.add("stale");
  });
  source.addEventListener("open", function () {
    live.classList.remove("stale");
  });
})();
