// The owner portal's live pages: when the server says something changed (server-sent events
// from /portal/events), fetch this page again and swap in the parts marked data-live. Every page
// works without this script; it only saves a reload.
(function () {
  "use strict";
  var source = document.body.getAttribute("data-events");
  if (!source || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var busy = false;
  var again = false;

  // A part the person is editing (a box unticked, a number changed) is not replaced under them.
  document.addEventListener("input", function (event) {
    var part = event.target.closest && event.target.closest("[data-live]");
    if (part) {
      part.setAttribute("data-edited", "");
    }
  });

  // A request that arrives above what the person is looking at gets a cue that stays in view.
  var cue = document.getElementById("new-above");
  function requestIds() {
    var seen = {};
    var cards = document.querySelectorAll(".request[id]");
    for (var i = 0; i < cards.length; i++) {
      seen[cards[i].id] = true;
    }
    return seen;
  }
  function cueNewAbove(before) {
    var cards = document.querySelectorAll(".request[id]");
    for (var i = 0; i < cards.length; i++) {
      if (!before[cards[i].id] && cards[i].getBoundingClientRect().bottom < 0) {
        cue.querySelector("a").setAttribute("href", "#" + cards[i].id);
        cue.classList.remove("hidden");
        return;
      }
    }
  }
  if (cue) {
    cue.addEventListener("click", function () {
      cue.classList.add("hidden");
    });
  }

  function swap(html) {
    var before = requestIds();
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var parts = document.querySelectorAll("[data-live]");
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i];
      var next = fresh.getElementById(part.id);
      if (!next) {
        continue;
      }
      if (part.hasAttribute("data-edited")) {
        document.getElementById("live-note").classList.remove("hidden");
        continue;
      }
      part.replaceWith(document.importNode(next, true));
    }
    if (cue) {
      cueNewAbove(before);
    }
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(window.location.href, {credentials: "same-origin", headers: {"X-Portal-Refresh": "1"}})
      .then(function (response) {
        if (!response.ok || response.redirected) {
          throw new Error("not refreshed: " + response.status);
        }
        return response.text();
      })
      .then(swap)
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var opened = false;
  var events = new EventSource(source);
  events.addEventListener("change", refresh);
  events.addEventListener("open", function () {
    document.body.setAttribute("data-live-state", "open");
    if (opened) {
      refresh(); // reconnected: what happened meanwhile
    }
    opened = true;
  });
  events.addEventListener("error", function () {
    document.body.setAttribute("data-live-state", "closed");
  });
})();
