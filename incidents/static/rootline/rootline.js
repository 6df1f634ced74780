// Rootline's pages: the queue's keys and filters, and confirmation of destructive actions.
// Served from the app's origin, as the Content-Security-Policy requires (no inline script); the
// pages work without it (plain links and forms), this only saves clicks.
(function () {
  "use strict";

  var chosenId = null; // the queue row the keys act on, kept across the queue's refreshes

  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("table.queue tbody tr[data-incident]"));
  }

  function choose(row) {
    rows().forEach(function (r) {
      r.classList.toggle("chosen", r === row);
      r.removeAttribute("aria-current");
    });
    if (!row) return;
    row.setAttribute("aria-current", "true");
    chosenId = row.getAttribute("data-incident");
    row.scrollIntoView({block: "nearest"});
  }

  function chosenRow() {
    return rows().filter(function (r) { return r.getAttribute("data-incident") === chosenId; })[0] || null;
  }

  function move(step) {
    var all = rows();
    if (!all.length) return;
    var at = all.indexOf(chosenRow());
    choose(all[Math.min(Math.max(at + step, 0), all.length - 1)] || all[0]);
  }

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  function helpDialog() {
    return document.getElementById("keys-help");
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (!document.querySelector("table.queue, #queue")) return;
    var row = chosenRow();
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "Enter":
        if (!row) return;
        window.location.assign(row.getAttribute("data-href"));
        break;
      case "a":
        var ack = row && row.querySelector("form.ack-form");
        if (!ack) return;
        ack.requestSubmit();
        break;
      case "/":
        var search = document.getElementById("queue-search");
        if (!search) return;
        search.focus();
        search.select();
        break;
      case "?":
        var dialog = helpDialog();
        if (!dialog) return;
        if (dialog.open) dialog.close(); else dialog.showModal();
        break;
      default:
        return;
    }
    event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    var opener = event.target.closest && event.target.closest(".keys-help-open");
    if (opener && helpDialog()) helpDialog().showModal();
  });

  // A filter's select or checkbox applies at once: the queue's URL then holds it.
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field.hasAttribute && field.hasAttribute("data-autosubmit") && field.form) field.form.requestSubmit();
  });

  // Destructive actions (merge, split, exclude, resolve) ask first.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // The queue refreshes itself every few seconds (htmx); the row chosen by the keys stays chosen.
  document.addEventListener("htmx:afterSwap", function () {
    if (chosenId) choose(chosenRow());
  });
  // A poll that fails (the server restarting) is tried again at the next tick; say so meanwhile.
  document.addEventListener("htmx:sendError", function () {
    var queue = document.getElementById("queue");
    if (queue) queue.classList.add("stale");
  });
})();

// The postmortem editor's autosave: what a person typed is sent at most every few seconds (a new
// revision each time), and once more when the page is left, so a reload loses nothing.
(function () {
  "use strict";
  var editor = document.getElementById("pm-editor");
  if (!editor) return;
  var status = document.getElementById("pm-save-status");
  var url = editor.getAttribute("data-save-url");
  var token = editor.querySelector("input[name=csrfmiddlewaretoken]").value;
  var dirty = {};
  var saving = false;
  var EVERY_MS = 3000;

  function body() {
    var sections = Object.keys(dirty).map(function (key) { return {key: key, markdown: dirty[key]}; });
    return JSON.stringify({sections: sections});
  }

  function say(text) { if (status) status.textContent = text; }

  function save(keepalive) {
    if (saving || !Object.keys(dirty).length) return;
    var sending = body();
    var sent = dirty;
    dirty = {};
    saving = true;
    fetch(url, {method: "POST", body: sending, keepalive: !!keepalive, credentials: "same-origin",
                headers: {"Content-Type": "application/json", "X-CSRFToken": token}})
      .then(function (answer) { return answer.json().then(function (data) { return [answer.ok, data]; }); })
      .then(function (result) {
        if (result[0]) {
          say("Saved as revision " + result[1].revision + " at " + new Date().toLocaleTimeString() + ".");
        } else {
          say("Not saved: " + result[1].error);
          Object.keys(sent).forEach(function (key) { if (!(key in dirty)) dirty[key] = sent[key]; });
        }
      })
      .catch(function () {
        say("Not saved yet (no answer); trying again.");
        Object.keys(sent).forEach(function (key) { if (!(key in dirty)) dirty[key] = sent[key]; });
      })
      .then(function () { saving = false; });
  }

  editor.addEventListener("input", function (event) {
    var area = event.target;
    if (area.tagName !== "TEXTAREA" || !area.hasAttribute("data-section")) return;
    dirty[area.getAttribute("data-section")] = area.value;
    say("Editing…");
  });
  setInterval(function () { save(false); }, EVERY_MS);
  window.addEventListener("pagehide", function () { save(true); });
  document.addEventListener("visibilitychange", function () { if (document.visibilityState === "hidden") save(true); });
})();
