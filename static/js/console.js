// Orbit Console: the little JavaScript the pages need. No inline scripts (strict CSP).
(function () {
  "use strict";

  // Tell the server the person's time zone, so that times are shown (and datetime inputs read)
  // in local time. Reload once when it changes so the page shows the right times.
  try {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    var current = (document.cookie.match(/(?:^|; )orbit_tz=([^;]*)/) || [])[1];
    if (zone && decodeURIComponent(current || "") !== zone) {
      document.cookie = "orbit_tz=" + encodeURIComponent(zone) + "; path=/; SameSite=Lax; max-age=31536000";
      if (current === undefined && document.querySelector("time[datetime]")) {
        window.location.reload();
      }
    }
  } catch (e) { /* no Intl: times stay in UTC */ }

  document.addEventListener("DOMContentLoaded", function () {
    // Switch language as soon as one is chosen (the button remains for keyboards and no-JS).
    document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
      select.addEventListener("change", function () { select.form.submit(); });
    });
    document.querySelectorAll("[data-max-chars]").forEach(countCharacters);
    document.querySelectorAll("button[data-copy]").forEach(copyButton);
    refreshRelativeTimes();
    // Every 30 s, and for what htmx or a socket brings in later: "3 minutes ago" stays true.
    window.setInterval(refreshRelativeTimes, 30000);
    document.body.addEventListener("htmx:afterSettle", refreshRelativeTimes);
    document.body.addEventListener("htmx:wsAfterMessage", refreshRelativeTimes);
  });

  // --- Relative times (templatetags/console.py "ago"): the text says how long ago, in the
  // page's language; the exact local and UTC times stay in the title. ---
  var UNITS = [
    ["year", 365 * 86400], ["month", 30 * 86400], ["week", 7 * 86400],
    ["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]
  ];
  var relativeFormat = null;
  function relativeText(date) {
    if (!relativeFormat) {
      relativeFormat = new Intl.RelativeTimeFormat(document.documentElement.lang || undefined, { numeric: "auto" });
    }
    var seconds = (date.getTime() - Date.now()) / 1000;
    var size = Math.abs(seconds);
    if (size < 45) { return relativeFormat.format(0, "second"); }
    for (var i = 0; i < UNITS.length; i++) {
      if (size >= UNITS[i][1] || UNITS[i][0] === "second") {
        return relativeFormat.format(Math.trunc(seconds / UNITS[i][1]), UNITS[i][0]);
      }
    }
    return "";
  }
  function refreshRelativeTimes() {
    if (!window.Intl || !Intl.RelativeTimeFormat) { return; } // the server's text stays
    document.querySelectorAll("time[data-relative][datetime]").forEach(function (time) {
      var date = new Date(time.getAttribute("datetime"));
      if (isNaN(date.getTime())) { return; }
      var text = relativeText(date);
      if (time.textContent !== text) { time.textContent = text; }
    });
  }

  // --- Copy buttons on ids (templatetags/console.py "copy_button"): the clipboard, then a
  // visible "Copied" on the button and the same word in a polite live region. ---
  var copyStatus = null;
  function announce(text) {
    if (!copyStatus) {
      copyStatus = document.createElement("p");
      copyStatus.className = "visually-hidden";
      copyStatus.setAttribute("role", "status");
      document.body.appendChild(copyStatus);
    }
    copyStatus.textContent = "";
    window.setTimeout(function () { copyStatus.textContent = text; }, 50);
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy-text]");
    if (!button) { return; }
    var copied = function () {
      if (!button.dataset.label) { button.dataset.label = button.textContent; }
      button.textContent = button.dataset.copied;
      button.classList.add("done");
      announce(button.dataset.copied);
      clearTimeout(button.orbitCopied);
      button.orbitCopied = window.setTimeout(function () {
        button.textContent = button.dataset.label;
        button.classList.remove("done");
      }, 2000);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(button.dataset.copyText).then(copied, function () {
        window.prompt(button.getAttribute("aria-label"), button.dataset.copyText);
      });
    } else {
      // No clipboard open to the page (plain HTTP away from localhost): show it to copy by hand.
      window.prompt(button.getAttribute("aria-label"), button.dataset.copyText);
    }
  });

  // A button that copies the text of the element it names (data-copy); where the clipboard is
  // not open to the page (plain HTTP away from localhost), it selects the text for Ctrl+C.
  function copyButton(button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.dataset.copy);
      function select() {
        window.getSelection().selectAllChildren(source);
      }
      function done() {
        button.textContent = button.dataset.copied;
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.textContent).then(done, select);
      } else {
        select();
      }
    });
  }

  // A live counter under a field with a length limit (forms.UncutText): what is left, or how
  // much is too much. Nothing is cut; the server refuses an overlong text with the count.
  function countCharacters(field) {
    var max = parseInt(field.dataset.maxChars, 10);
    var counter = document.createElement("p");
    counter.className = "counter";
    counter.id = field.id + "_counter";
    counter.setAttribute("aria-live", "polite");
    field.insertAdjacentElement("afterend", counter);
    var described = (field.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
    field.setAttribute("aria-describedby", described.concat(counter.id).join(" "));
    function update() {
      var count = Array.from(field.value).length; // code points, as the server counts
      var over = count - max;
      var text = over > 0 ? field.dataset.counterOver : field.dataset.counterLeft;
      counter.textContent = text.replace("{count}", count).replace("{over}", over).replace("{max}", max);
      counter.classList.toggle("over", over > 0);
    }
    field.addEventListener("input", update);
    update();
  }

  // A form that sends a decision is sent once: a double click must not post twice. The server
  // also refuses a second decision for the same task revision; this only spares the round trip.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches("form[data-submit-once]")) { return; }
    if (form.dataset.submitted === "yes") { event.preventDefault(); return; }
    form.dataset.submitted = "yes";
    // Disable after the browser has collected the form data, so the pressed button is sent.
    window.setTimeout(function () {
      form.querySelectorAll("button[type=submit]").forEach(function (button) { button.disabled = true; });
    }, 0);
  }, true);
})();

// The live timeline (templates/timeline/partials/timeline.html). Entries arrive over the
// WebSocket as htmx out-of-band swaps; each carries its id and a sort key (time|id), so that a
// duplicate is dropped and a late one lands in its place. After every (re)connect the page
// fetches what came after its newest platform entry and merges it (or, when it missed more than
// a catch-up fetches, starts over from the newest page): the channel layer delivers at most once
// and the ws extension replays nothing.
(function () {
  "use strict";

  function list() { return document.getElementById("timeline-entries"); }

  function sortEntries() {
    var entries = list();
    if (!entries) { return; }
    var items = Array.prototype.slice.call(entries.querySelectorAll(":scope > li[data-sort]"));
    items.sort(function (a, b) { return a.dataset.sort < b.dataset.sort ? 1 : (a.dataset.sort > b.dataset.sort ? -1 : 0); });
    items.forEach(function (item) { entries.appendChild(item); });
    var empty = document.getElementById("timeline-empty");
    if (empty && items.length) { empty.remove(); }
  }

  // HTML text as nodes, without running or loading anything (a template's content is inert).
  function parse(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    return template.content;
  }

  // Fetch a fragment of the console as htmx would and hand it over with its response; when the
  // fetch fails, the next reconnect tries again.
  function fetchFragment(url, handle) {
    // Orbit-Background: the page asks on its own, which keeps no idle session alive.
    fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true", "Orbit-Background": "1" } })
      .then(function (response) {
        if (response.status === 401) { document.dispatchEvent(new CustomEvent("orbit:signed-out")); }
        if (!response.ok) { return; }
        return response.text().then(function (html) { handle(html, response); });
      })
      .catch(function () { /* the next reconnect tries again */ });
  }

  function showNoProposals() {
    var rows = document.getElementById("proposal-rows");
    var none = document.getElementById("no-proposals");
    if (rows && none) { none.hidden = rows.children.length > 0; }
  }

  // The task moved: say so, and let what depends on its state (the recovery panel) ask again.
  function showChanged() {
    var notice = document.getElementById("task-changed");
    if (notice) { notice.hidden = false; }
    document.body.dispatchEvent(new CustomEvent("orbit:task-moved"));
  }

  function merge(html) {
    var entries = list();
    if (!entries) { return; }
    var changed = false;
    parse(html).querySelectorAll("li[data-sort]").forEach(function (item) {
      if (!document.getElementById(item.id)) {
        entries.appendChild(item);
        changed = changed || item.classList.contains("source-platform");
      }
    });
    sortEntries();
    // A platform entry caught up after a reconnect changed the task just as a pushed one does.
    if (changed) { showChanged(); }
  }

  // The approvals queue catches up by taking the pending rows as they are now.
  function resyncRows(socketElement) {
    var url = socketElement.dataset.resyncRows;
    if (!url) { return; }
    fetchFragment(url, function (html) {
      var fresh = parse("<table>" + html + "</table>").querySelector("#proposal-rows");
      var rows = document.getElementById("proposal-rows");
      if (fresh && rows) { rows.innerHTML = fresh.innerHTML; }
      showNoProposals();
    });
  }

  // The time of the newest platform entry on the page: the server sends what came after it.
  function newestPlatformTime() {
    var newest = "";
    var entries = list();
    if (!entries) { return newest; }
    entries.querySelectorAll(":scope > li.source-platform[data-sort]").forEach(function (item) {
      var time = item.dataset.sort.split("|")[0];
      if (time > newest) { newest = time; }
    });
    return newest;
  }

  // More was missed than a catch-up fetches: show the newest page and its "Older" control.
  function startOver(html) {
    var entries = list();
    if (!entries) { return; }
    var fragment = parse(html);
    entries.replaceChildren.apply(entries, fragment.querySelectorAll("li[data-sort]"));
    var older = document.getElementById("timeline-older");
    if (older) { older.remove(); }
    var fresh = fragment.getElementById("timeline-older");
    if (fresh) {
      entries.after(fresh);
      if (window.htmx) { window.htmx.process(fresh); }
    }
    showChanged();
  }

  // A person's decisions catch up by taking the page's rows as they are now.
  function resyncDecisions(socketElement) {
    var url = socketElement.dataset.resyncDecisions;
    if (!url) { return; }
    fetchFragment(url, function (html) {
      var page = parse(html);
      ["decision-rows", "waiting-rows"].forEach(function (id) {
        var fresh = page.getElementById(id);
        var rows = document.getElementById(id);
        if (fresh && rows) { rows.innerHTML = fresh.innerHTML; }
      });
      showEmptyNotes();
    });
  }

  // A list's "nothing here" note (data-empty-of) shows while its list is empty.
  function showEmptyNotes() {
    document.querySelectorAll("[data-empty-of]").forEach(function (note) {
      var rows = document.getElementById(note.dataset.emptyOf);
      if (rows) { note.hidden = rows.children.length > 0; }
    });
  }

  // A pushed row of a list (data-live-list names it) takes the place of the row shown with its
  // id, or, new, comes first in its list (issue 30: lists add rows live); a row marked
  // data-live-gone leaves the list.
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var item = parse(event.detail.message).querySelector("[data-live-list][id]");
    if (!item) { return; }
    event.preventDefault();
    var shown = document.getElementById(item.id);
    var gone = item.hasAttribute("data-live-gone");
    item.removeAttribute("hx-swap-oob");
    if (shown) {
      if (gone) { shown.remove(); } else { shown.replaceWith(item); }
    } else if (!gone) {
      var rows = document.getElementById(item.dataset.liveList);
      if (rows) { rows.prepend(item); }
    }
    if (window.htmx) { window.htmx.process(item); }
    showEmptyNotes();
  });

  function resync(socketElement) {
    resyncRows(socketElement);
    resyncDecisions(socketElement);
    var url = socketElement.dataset.timelineResync;
    if (!url) { return; }
    var since = newestPlatformTime();
    if (since) { url += (url.indexOf("?") === -1 ? "?" : "&") + "since=" + encodeURIComponent(since); }
    fetchFragment(url, function (html, response) {
      (response.headers.get("Orbit-Timeline") === "reset" ? startOver : merge)(html);
    });
  }

  // A badge may speak for several sockets (a retry's receipt follows the task and its new
  // one: data-badge names the page's one badge): it then says the worst of their states.
  var LIVE_RANK = { live: 0, reconnecting: 2, paused: 3 };
  function setLive(socketElement, state) {
    socketElement.dataset.liveState = state;
    var badge = socketElement.querySelector(".flag.live") ||
      document.getElementById(socketElement.dataset.badge || "");
    if (!badge) { return; }
    var owner = badge.closest("[ws-connect]");
    var sharing = Array.from(document.querySelectorAll("[data-badge]")).filter(function (other) {
      return other.dataset.badge === badge.id;
    });
    var worst = state;
    [owner].concat(sharing).forEach(function (other) {
      var its = other && other.dataset.liveState;
      if (!its) { its = "connecting"; }
      var rank = LIVE_RANK[its] === undefined ? 1 : LIVE_RANK[its];
      var worstRank = LIVE_RANK[worst] === undefined ? 1 : LIVE_RANK[worst];
      if (rank > worstRank) { worst = its; }
    });
    badge.textContent = badge.dataset[worst] || badge.textContent;
    badge.dataset.state = worst;
  }

  // A live part of a page (data-live-region) asks the server again when the task is noted, but
  // never over what the person has typed into it: the page then says it has changed instead.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var region = event.target;
    if (!region.hasAttribute || !region.hasAttribute("data-live-region")) { return; }
    var typed = Array.prototype.some.call(
      region.querySelectorAll("input:not([type=hidden]), textarea, select"),
      function (field) {
        if (field.tagName === "SELECT") {
          return Array.prototype.some.call(field.options, function (option) {
            return option.selected !== option.defaultSelected;
          });
        }
        return field.type === "checkbox" || field.type === "radio"
          ? field.checked !== field.defaultChecked
          : field.value !== field.defaultValue;
      });
    if (typed) {
      event.preventDefault();
      var notice = document.getElementById("page-changed");
      if (notice) { notice.hidden = false; }
    }
  });

  // A page that only follows the task (templates/timeline/partials/listen.html) shows no
  // timeline: it takes each push as news that the task moved (a platform entry) or was noted
  // (a console entry), and its live parts ask the server again (hx-trigger on those events).
  function listenOnly(socketElement) { return socketElement.hasAttribute("data-listen-only"); }
  function tell(moved) {
    if (moved) { showChanged(); }
    document.body.dispatchEvent(new CustomEvent("orbit:task-noted"));
  }

  // A pushed item already on the page is a duplicate (the same id): drop the message. An item
  // that says it changed since (another data-live-version: a proposal approved once more)
  // takes the place of the one shown instead.
  // The navigation's count of what waits for a supervisor (base.html) listens to the approvals
  // feed: any push there is news that the count may have moved, and it asks again.
  function approvalsMoved() { document.body.dispatchEvent(new CustomEvent("orbit:approvals-moved")); }
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    if (event.target.hasAttribute && event.target.hasAttribute("data-listen-approvals")) {
      event.preventDefault();
      approvalsMoved();
      return;
    }
    if (listenOnly(event.target)) {
      event.preventDefault();
      tell(String(event.detail.message).indexOf("source-platform") !== -1);
      return;
    }
    var item = parse(event.detail.message).querySelector("[data-live-item][id]");
    var shown = item && document.getElementById(item.id);
    if (!shown) { return; }
    event.preventDefault();
    var version = item.getAttribute("data-live-version");
    if (version !== null && version !== shown.getAttribute("data-live-version")) {
      shown.replaceWith(item);
    }
  });
  document.addEventListener("htmx:wsAfterMessage", function (event) {
    sortEntries();
    var message = String(event.detail.message);
    if (message.indexOf("source-platform") !== -1) {
      showChanged();
    } else if (message.indexOf("source-console") !== -1) {
      // The console noted the task (a proposal made or decided, a decision stored): what the
      // page shows of it (the pending banner, the decisions) asks again.
      document.body.dispatchEvent(new CustomEvent("orbit:task-noted"));
    }
    showNoProposals();
  });
  document.addEventListener("htmx:wsOpen", function (event) {
    var socketElement = event.target;
    if (socketElement.hasAttribute("data-listen-approvals")) {
      if (socketElement.orbitOpened) { approvalsMoved(); } // open again: what moved meanwhile
      socketElement.orbitOpened = true;
      return;
    }
    setLive(socketElement, "live");
    if (listenOnly(socketElement)) {
      // Open again after a drop: what was missed meanwhile is asked for as news.
      if (socketElement.orbitOpened) { tell(false); }
      socketElement.orbitOpened = true;
    } else {
      resync(socketElement);
    }
    // Open for a while: the service is back, so a later pause starts its backoff afresh.
    clearTimeout(socketElement.orbitSteady);
    socketElement.orbitSteady = setTimeout(function () { socketElement.orbitPauses = 0; }, 5000);
  });
  // The server closes with 4503 while a service it needs (the channel layer) is down: the page
  // says live updates are paused and tries again itself, with a growing, jittered pause (at most
  // 30 s), as the ws extension does only for the standard "try again" codes.
  var CLOSE_UNAVAILABLE = 4503;
  var CLOSE_UNAUTHENTICATED = 4401;
  document.addEventListener("htmx:wsClose", function (event) {
    var socketElement = event.target;
    clearTimeout(socketElement.orbitSteady);
    var code = event.detail.event && event.detail.event.code;
    // 4401: the session has ended; the page says "signed out" (see "Sessions and drafts" below).
    if (code === CLOSE_UNAUTHENTICATED) { document.dispatchEvent(new CustomEvent("orbit:signed-out")); return; }
    if (code !== CLOSE_UNAVAILABLE) { setLive(socketElement, "reconnecting"); return; }
    setLive(socketElement, "paused");
    var pauses = socketElement.orbitPauses = (socketElement.orbitPauses || 0) + 1;
    var delay = Math.random() * Math.min(30000, 1000 * Math.pow(2, pauses));
    setTimeout(function () {
      if (document.body.contains(socketElement)) { event.detail.socketWrapper.reconnect(); }
    }, delay);
  });
})();

// --- Sessions and drafts (issue 30; docs/console.md "Sessions and drafts") ----------------------
// The page knows when its session ends (#session-note, base.html) and warns before: at the idle
// end it offers "Stay signed in" (POST /session/extend, CSRF-protected); at the end of the
// sign-in, which nothing extends, it says when to sign in again. Before warning it asks
// GET /session (a look that moves no end), since another tab may have kept the session alive.
// Once the session has ended — the server closed a socket with 4401, a live part was answered
// 401, or /session says so — every live badge says "signed out" and the note offers to sign in.
// On a wizard step that link sends the step's form (nav=stay): without a session the server keeps
// what it holds and gives it back after signing in. Forms with typed text are also saved in this
// tab's sessionStorage as they are typed, and filled back into empty fields (a safety net only:
// the server keeps drafts without it).
(function () {
  "use strict";

  var note, text, stay, signIn;
  var state = null;
  var skew = 0;
  var timer = null;
  var signedOut = false;

  function now() { return Date.now() + skew; }

  function formatTime(ms) {
    var lang = document.documentElement.lang || undefined;
    try {
      return new Date(ms).toLocaleTimeString(lang, { hour: "2-digit", minute: "2-digit" });
    } catch (e) {
      return new Date(ms).toISOString().slice(11, 16) + " UTC";
    }
  }

  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (e) { return ""; }
  }

  function adopt(fresh) {
    if (!fresh || !fresh.signed_in) { showSignedOut(); return; }
    skew = fresh.now - Date.now();
    state = {
      expiresAt: fresh.expires_at,
      extendable: !!fresh.extendable,
      warnMs: fresh.warn_seconds * 1000
    };
    schedule();
  }

  function later(fn, ms) {
    clearTimeout(timer);
    timer = setTimeout(fn, Math.max(250, Math.min(ms, 2147483647)));
  }

  function schedule() {
    if (signedOut || !state) { return; }
    var left = state.expiresAt - now();
    if (left > state.warnMs) {
      hideWarning();
      later(check, left - state.warnMs);
    } else if (left > 0) {
      showWarning();
      later(check, left + 500);
    } else {
      later(check, 5000);
    }
  }

  // Ask the server how things stand; a failed look tries again a little later.
  function check() {
    if (signedOut) { return; }
    fetch(note.dataset.statusUrl, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (fresh) { if (fresh) { adopt(fresh); } else { later(check, 10000); } })
      .catch(function () { later(check, 10000); });
  }

  function showWarning() {
    var template = state.extendable ? note.dataset.textIdle : note.dataset.textEnd;
    var message = template.replace("{time}", formatTime(state.expiresAt));
    stay.hidden = !state.extendable;
    signIn.hidden = true;
    if (note.hidden || text.textContent !== message) { text.textContent = message; }
    note.hidden = false;
  }

  function hideWarning() {
    if (!signedOut) { note.hidden = true; }
  }

  function showSignedOut() {
    clearTimeout(timer);
    document.querySelectorAll(".flag.live").forEach(function (badge) {
      badge.textContent = note ? note.dataset.signedOut : "signed out";
      badge.dataset.state = "signed-out";
    });
    if (!note || signedOut) { signedOut = true; return; }
    signedOut = true;
    text.textContent = note.dataset.textEnded;
    stay.hidden = true;
    signIn.hidden = false;
    note.hidden = false;
  }

  function stayed() {
    stay.disabled = true;
    fetch(note.dataset.extendUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken(), "Accept": "application/json" }
    })
      .then(function (response) {
        if (response.status === 401) { showSignedOut(); return null; }
        return response.ok ? response.json() : null;
      })
      .then(function (fresh) {
        stay.disabled = false;
        if (fresh) { adopt(fresh); return; }
        if (!signedOut) { text.textContent = note.dataset.textFailed; }
      })
      .catch(function () {
        stay.disabled = false;
        text.textContent = note.dataset.textFailed;
      });
  }

  // On a wizard step, signing in again goes through the step's own form: it keeps everything.
  function signInKeepingTheStep(event) {
    var form = document.querySelector("form[data-stay-on-sign-in]");
    if (!form) { return; }
    event.preventDefault();
    var nav = document.createElement("input");
    nav.type = "hidden";
    nav.name = "nav";
    nav.value = "stay";
    form.appendChild(nav);
    saveForm(form);
    HTMLFormElement.prototype.submit.call(form);
  }

  // --- The tab's own copy of typed text (sessionStorage), for the person signed in only ---
  var STORED = "orbit.draft:";

  function storageKey(form) {
    var step = form.querySelector("input[name=step]");
    return STORED + note.dataset.person + "|" + location.pathname + "|" +
      (form.getAttribute("action") || "") + "|" + (step ? step.value : "");
  }

  function forgetStored() {
    try {
      Object.keys(sessionStorage).forEach(function (key) {
        if (key.indexOf(STORED) === 0) { sessionStorage.removeItem(key); }
      });
    } catch (e) { /* off */ }
  }

  function typedFields(form) {
    return Array.prototype.filter.call(form.elements, function (field) {
      return field.name && (field.tagName === "TEXTAREA" ||
        (field.tagName === "INPUT" && /^(text|number|datetime-local|search|url|email)$/.test(field.type)));
    });
  }

  function saveForm(form) {
    var values = {};
    typedFields(form).forEach(function (field) { if (field.value) { values[field.name] = field.value; } });
    try { sessionStorage.setItem(storageKey(form), JSON.stringify(values)); } catch (e) { /* full or off */ }
  }

  function restoreForm(form) {
    var saved;
    try { saved = JSON.parse(sessionStorage.getItem(storageKey(form)) || "null"); } catch (e) { saved = null; }
    if (!saved) { return; }
    typedFields(form).forEach(function (field) {
      if (!field.value && saved[field.name]) {
        field.value = saved[field.name];
        field.dispatchEvent(new Event("input", { bubbles: true }));
      }
    });
  }

  function keepTyping(form) {
    restoreForm(form);
    form.addEventListener("input", function () { saveForm(form); });
    // Sent: the server has it now (and keeps it if the session has ended).
    form.addEventListener("submit", function () {
      try { sessionStorage.removeItem(storageKey(form)); } catch (e) { /* off */ }
    });
  }

  document.addEventListener("orbit:signed-out", showSignedOut);
  document.addEventListener("htmx:responseError", function (event) {
    if (event.detail.xhr && event.detail.xhr.status === 401) { showSignedOut(); }
  });
  // A request the page makes on its own (a live part asking again after a push) is not the
  // person's: it does not keep an idle session alive.
  document.addEventListener("htmx:configRequest", function (event) {
    var cause = event.detail.triggeringEvent;
    if (cause && typeof cause.type === "string" && cause.type.indexOf("orbit:") === 0) {
      event.detail.headers["Orbit-Background"] = "1";
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    note = document.getElementById("session-note");
    if (!note) { return; }
    document.querySelectorAll("form[data-keeps-draft]").forEach(keepTyping);
    // Signing out on purpose: nothing typed stays in the tab either.
    document.addEventListener("submit", function (event) {
      if (event.target.getAttribute("action") === note.dataset.signOutUrl) { forgetStored(); }
    });
    text = document.getElementById("session-note-text");
    stay = document.getElementById("session-stay");
    signIn = document.getElementById("session-sign-in");
    stay.addEventListener("click", stayed);
    signIn.addEventListener("click", signInKeepingTheStep);
    if (signedOut) { signedOut = false; showSignedOut(); return; } // a socket said so already
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") { check(); }
    });
    adopt({
      signed_in: true,
      expires_at: parseInt(note.dataset.expiresAt, 10),
      extendable: note.dataset.extendable === "yes",
      warn_seconds: parseInt(note.dataset.warnSeconds, 10),
      now: parseInt(note.dataset.now, 10)
    });
  });
})();


// --- Back never shows a stale page as live (issue 30) --------------------------------------------
// A page with live parts that the browser brings back on Back or Forward shows what was true
// then. From the HTTP cache (nothing transferred) its scripts run afresh: its sockets open and
// catch up on their own (the timeline, the lists), and its live parts ask again at once (the task
// page's summary, a wizard's notes, the navigation's count). From the back/forward cache, with
// its old sockets gone, the page loads again from its address — except a wizard step, which
// holds what the person typed: it stays and asks its live parts again.
(function () {
  "use strict";

  function live() { return document.querySelector("[ws-connect]:not([data-listen-approvals])"); }

  function askAgain() {
    ["orbit:task-moved", "orbit:task-noted", "orbit:approvals-moved"].forEach(function (name) {
      document.body.dispatchEvent(new CustomEvent(name));
    });
  }

  function cameBackFromTheCache() {
    try {
      var navigation = performance.getEntriesByType("navigation")[0];
      return !!navigation && navigation.type === "back_forward" && navigation.transferSize === 0;
    } catch (e) { return false; }
  }

  window.addEventListener("pageshow", function (event) {
    if (!live()) { return; }
    if (event.persisted) {
      document.querySelectorAll(".flag.live").forEach(function (badge) {
        badge.textContent = badge.dataset.reconnecting || badge.textContent;
        badge.dataset.state = "reconnecting";
      });
      if (document.querySelector("form[data-keeps-draft]")) { askAgain(); } else { window.location.reload(); }
    } else if (cameBackFromTheCache()) {
      askAgain();
    }
  });
})();

// A request of the page's that the console turned away because it is busy (503 with
// Retry-After: load shedding, docs/deployment.md): say so rather than nothing happening. It did
// nothing; the next request that is answered hides the note.
(function () {
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var note = document.getElementById("busy-note");
    if (note && xhr && xhr.status === 503 && xhr.getResponseHeader("Retry-After")) {
      note.hidden = false;
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var note = document.getElementById("busy-note");
    if (note && event.detail.successful) { note.hidden = true; }
  });
})();
