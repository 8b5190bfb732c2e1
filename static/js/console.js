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
  });

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
