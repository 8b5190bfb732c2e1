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
    fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true" } })
      .then(function (response) {
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
      var fresh = parse(html).getElementById("decision-rows");
      var rows = document.getElementById("decision-rows");
      if (fresh && rows) { rows.innerHTML = fresh.innerHTML; }
    });
  }

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

  function setLive(socketElement, state) {
    var badge = socketElement.querySelector(".flag.live");
    if (badge) { badge.textContent = badge.dataset[state] || state; badge.dataset.state = state; }
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
  document.addEventListener("htmx:wsBeforeMessage", function (event) {
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
    if (String(event.detail.message).indexOf("source-platform") !== -1) { showChanged(); }
    showNoProposals();
  });
  document.addEventListener("htmx:wsOpen", function (event) {
    var socketElement = event.target;
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
  document.addEventListener("htmx:wsClose", function (event) {
    var socketElement = event.target;
    clearTimeout(socketElement.orbitSteady);
    var code = event.detail.event && event.detail.event.code;
    if (code !== CLOSE_UNAVAILABLE) { setLive(socketElement, "reconnecting"); return; }
    setLive(socketElement, "paused");
    var pauses = socketElement.orbitPauses = (socketElement.orbitPauses || 0) + 1;
    var delay = Math.random() * Math.min(30000, 1000 * Math.pow(2, pauses));
    setTimeout(function () {
      if (document.body.contains(socketElement)) { event.detail.socketWrapper.reconnect(); }
    }, delay);
  });
})();
