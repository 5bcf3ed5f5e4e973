// reflect-jobs ui: refresh the live sections, send retry/resume with the run's token, search.
// No framework and no build step. Server HTML is escaped by the server; anything built here
// from JSON uses textContent only.
(function () {
  "use strict";
  var token = document.querySelector('meta[name="reflect-token"]').content;
  var live = document.getElementById("live");
  var flash = document.getElementById("flash");
  var refreshed = document.getElementById("refreshed");
  var every = (parseInt(document.body.dataset.refreshSec, 10) || 5) * 1000;
  var busy = false;

  function say(text, bad) {
    flash.textContent = text;
    flash.className = bad ? "bad" : "good";
  }

  var loading = false;
  var again = false;

  function refresh() {
    // Not while a POST is in flight or a refresh still loads; not in a hidden tab (the
    // server renders the whole snapshot for every refresh).
    if (busy) return Promise.resolve();
    if (loading) {
      again = true; // the snapshot in flight may predate a change: load once more after it
      return Promise.resolve();
    }
    loading = true;
    return fetch("/fragment" + jobFilter(), { cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        refreshed.textContent = "updated " + new Date().toLocaleTimeString();
        refreshed.className = "meta";
      })
      .catch(function (err) {
        refreshed.textContent = "refresh failed: " + err.message;
        refreshed.className = "bad";
      })
      .finally(function () {
        loading = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  // The jobs list's filters travel with every refresh of the queue view.
  function jobFilter() {
    var form = document.getElementById("job-filter");
    if (!form) return "";
    var q = new URLSearchParams();
    ["state", "stage"].forEach(function (name) {
      var v = form.elements[name] && form.elements[name].value;
      if (v) q.set(name, v);
    });
    var s = q.toString();
    return s ? "?" + s : "";
  }

  live.addEventListener("change", function (ev) {
    if (ev.target.closest("#job-filter")) refresh();
  });

  // The memory view reloads after an action or on its Refresh button only: a refresh
  // every few seconds would wipe a note being typed into a Done/Drop form.
  var memory = document.getElementById("memory");
  var memoryRefresh = document.getElementById("memory-refresh");

  // aria-busy says a reload is in flight (screen readers, and the browser test, wait on it).
  function reloadMemory() {
    memory.setAttribute("aria-busy", "true");
    return fetch("/fragment/memory", { cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        memory.innerHTML = html;
      })
      .catch(function (err) {
        say("memory view failed to load: " + err.message, true);
      })
      .finally(function () {
        memory.setAttribute("aria-busy", "false");
      });
  }

  document.getElementById("views").addEventListener("click", function (ev) {
    var button = ev.target.closest("button");
    if (!button) return;
    if (button === memoryRefresh) {
      reloadMemory();
      return;
    }
    var view = button.dataset.view;
    if (!view) return;
    live.hidden = view !== "live";
    memory.hidden = view !== "memory";
    memoryRefresh.hidden = view !== "memory";
    document.querySelectorAll("#views [data-view]").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.dataset.view === view));
    });
    if (view === "memory") reloadMemory();
    else refresh();
  });

  function sent(res) {
    say(res.ok ? res.body.message : "failed: " + (res.body.error || "unknown"), !res.ok);
  }

  memory.addEventListener("click", function (ev) {
    var button = ev.target.closest("button[data-review], button[data-forget], button[data-restore]");
    if (!button) return;
    var url;
    if (button.dataset.review)
      url = "/api/review/" + encodeURIComponent(button.dataset.id) + "/" + button.dataset.review;
    else if (button.dataset.forget)
      url = "/api/learnings/" + encodeURIComponent(button.dataset.forget) + "/forget";
    else url = "/api/learnings/" + encodeURIComponent(button.dataset.restore) + "/restore";
    button.disabled = true;
    post(url)
      .then(sent)
      .catch(function (err) {
        say("failed: " + err.message, true);
      })
      .then(reloadMemory);
  });

  memory.addEventListener("submit", function (ev) {
    var form = ev.target.closest("form.item-change");
    if (!form) return;
    ev.preventDefault();
    var op = ev.submitter && ev.submitter.value;
    var note = form.elements.note.value.trim();
    if (!note) {
      say("a note is required: the evidence it is done, or why it is dropped", true);
      return;
    }
    post("/api/items/change", {
      repository: form.dataset.repository,
      id: form.dataset.item,
      op: op,
      note: note,
    })
      .then(sent)
      .catch(function (err) {
        say("failed: " + err.message, true);
      })
      .then(reloadMemory);
  });

  function post(url, payload) {
    busy = true;
    var headers = { "X-Reflect-Token": token };
    var init = { method: "POST", headers: headers };
    if (payload !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    return fetch(url, init)
      .then(function (r) {
        return r.json().then(function (body) {
          return { ok: r.ok, body: body };
        });
      })
      .finally(function () {
        busy = false;
      });
  }

  live.addEventListener("click", function (ev) {
    var button = ev.target.closest("button");
    if (!button) return;
    var url;
    if (button.dataset.retry) url = "/api/retry/" + encodeURIComponent(button.dataset.retry);
    else if (button.id === "resume") url = "/api/resume";
    else return;
    button.disabled = true;
    post(url)
      .then(function (res) {
        say(res.ok ? res.body.message : "failed: " + (res.body.error || "unknown"), !res.ok);
      })
      .catch(function (err) {
        say("failed: " + err.message, true);
      })
      .then(refresh);
  });

  document.getElementById("search").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var q = document.getElementById("q").value;
    var out = document.getElementById("search-results");
    fetch("/api/search?q=" + encodeURIComponent(q), { cache: "no-store" })
      .then(function (r) {
        return r.json();
      })
      .then(function (res) {
        out.replaceChildren();
        var h = document.createElement("h2");
        h.textContent = "Search: " + q;
        out.appendChild(h);
        (res.warnings || []).concat(res.error ? [res.error] : []).forEach(function (w) {
          var p = document.createElement("p");
          p.className = "warning";
          p.textContent = w;
          out.appendChild(p);
        });
        var ol = document.createElement("ol");
        (res.hits || []).forEach(function (hit) {
          var li = document.createElement("li");
          li.className = "hit";
          var b = document.createElement("strong");
          b.textContent = hit.title;
          var c = document.createElement("code");
          c.textContent = " " + hit.id;
          li.appendChild(b);
          li.appendChild(c);
          ol.appendChild(li);
        });
        if (!ol.children.length) {
          var none = document.createElement("p");
          none.className = "empty";
          none.textContent = "No matching notes.";
          out.appendChild(none);
        } else out.appendChild(ol);
        out.hidden = false;
      })
      .catch(function (err) {
        say("search failed: " + err.message, true);
      });
  });

  refreshed.textContent = "updated " + new Date().toLocaleTimeString();
  setInterval(function () {
    if (!document.hidden) refresh();
  }, every);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) refresh();
  });
})();
