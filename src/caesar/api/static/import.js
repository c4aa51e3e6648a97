// The import page's one script (api/dashboard_import.py): while the memory workers learn an
// import ("learning 3 of 10"), read the page again every few seconds and put its fresh table
// of recent imports in place, until every one says "learned". The table is HTML the server
// rendered with Jinja, escaped like every page. Without this script a reload does the same.
"use strict";

(() => {
  const POLL_MS = 3000;

  async function poll() {
    const table = document.querySelector("table.imports");
    if (!table || !table.dataset.learning) return;
    try {
      const response = await fetch(location.pathname, { credentials: "same-origin" });
      if (response.ok) {
        const fresh = new DOMParser()
          .parseFromString(await response.text(), "text/html")
          .querySelector("table.imports");
        if (fresh) table.replaceWith(fresh);
        if (fresh && !fresh.dataset.learning) {
          document.querySelector("p.learning-hint")?.remove();
          return;
        }
      }
    } catch (error) {
      // the server restarting, the network gone: try again at the next tick
    }
    setTimeout(poll, POLL_MS);
  }

  setTimeout(poll, POLL_MS);
})();
