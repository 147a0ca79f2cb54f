// Keeps the page current: the hub sends a "change" event when its caches change, and the page then
// fetches its main part again from the hub (which reads its caches, not the API servers).
(function () {
  "use strict";
  let fetching = false;
  let again = false;

  async function refresh() {
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    try {
      const response = await fetch("/fragment" + location.pathname, { credentials: "same-origin", cache: "no-store" });
      if (response.ok) {
        document.getElementById("main").outerHTML = await response.text();
        document.body.dataset.updated = String(Date.now());
      }
    } finally {
      fetching = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }

  const events = new EventSource("/events");
  events.addEventListener("change", refresh);
  events.onopen = function () { document.body.dataset.live = "true"; };
  events.onerror = function () { document.body.dataset.live = "false"; };
})();
