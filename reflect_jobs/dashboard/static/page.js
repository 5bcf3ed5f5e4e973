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
    return fetch("/fragment", { cache: "no-store" })
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

  function post(url) {
    busy = true;
    return fetch(url, { method: "POST", headers: { "X-Reflect-Token": token } })
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
