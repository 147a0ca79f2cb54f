// Keeps the page current: the hub sends a "change" event when its caches change, and the page then
// asks for its main part again (the hub reads its caches, not the API servers). It sends back the tag
// of what it shows, so that a part that did not change costs a 304 and no redraw.
(function () {
  "use strict";
  let fetching = false;
  let again = false;
  let shown = null;

  async function refresh() {
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    try {
      const headers = shown ? { "If-None-Match": shown } : {};
      const response = await fetch("/fragment" + location.pathname + location.search,
        { credentials: "same-origin", cache: "no-store", headers: headers });
      if (response.ok) {
        shown = response.headers.get("ETag");
        document.getElementById("main").outerHTML = await response.text();
        document.body.dataset.updated = String(Date.now());
        watchFilters();
      }
    } finally {
      fetching = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }

  // A filter picked shows its first page at once.
  function watchFilters() {
    const form = document.getElementById("filters");
    if (form) {
      form.addEventListener("change", function () { form.requestSubmit(); });
    }
  }

  watchFilters();
  const events = new EventSource("/events");
  events.addEventListener("change", refresh);
  events.onopen = function () { document.body.dataset.live = "true"; };
  events.onerror = function () { document.body.dataset.live = "false"; };
})();
