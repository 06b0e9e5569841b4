// Admin dashboard: live numbers and job progress without a full page reload (plain fetch()).
(function () {
  "use strict";

  function get(obj, path) {
    return path.split(".").reduce(function (o, k) { return o == null ? undefined : o[k]; }, obj);
  }

  var localFormat = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit"
  });
  // A UTC ISO timestamp as a readable time in the viewer's own time zone.
  function localTime(iso) {
    var when = new Date(iso);
    return isNaN(when.getTime()) ? iso : localFormat.format(when);
  }

  function pollNumbers(el) {
    var url = el.getAttribute("data-poll");
    var every = parseInt(el.getAttribute("data-interval") || "5000", 10);
    function tick() {
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
        .then(function (data) {
          el.classList.remove("stale");
          document.querySelectorAll("[data-key]").forEach(function (node) {
            var v = get(data, node.getAttribute("data-key"));
            if (v === undefined) return;
            if (node.tagName === "TIME") { node.setAttribute("datetime", v); node.textContent = localTime(v); }
            else node.textContent = v;
          });
          document.querySelectorAll("[data-width-key]").forEach(function (node) {
            var part = get(data, node.getAttribute("data-width-key"));
            var whole = get(data, node.getAttribute("data-width-of"));
            node.style.width = (whole ? (100 * part / whole) : 0) + "%";
          });
        })
        .catch(function () { el.classList.add("stale"); })
        .finally(function () { setTimeout(tick, every); });
    }
    setTimeout(tick, every);
  }

  function refreshImages() {
    document.querySelectorAll("img[data-refresh]").forEach(function (img) {
      var every = parseInt(img.getAttribute("data-refresh"), 10);
      var base = img.getAttribute("src").split("?")[0];
      setInterval(function () { img.src = base + "?t=" + Date.now(); }, every);
    });
  }

  function pollJobs() {
    var rows = document.querySelectorAll("tr[data-job]");
    rows.forEach(function (row) {
      var status = row.getAttribute("data-status");
      if (status !== "queued" && status !== "running") return;
      var id = row.getAttribute("data-job");
      function tick() {
        fetch("/admin/api/jobs/" + id, { headers: { Accept: "application/json" }, credentials: "same-origin" })
          .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
          .then(function (job) {
            var tag = row.querySelector("[data-job-key=status]");
            tag.textContent = job.status; tag.className = "tag " + job.status;
            row.querySelector("[data-job-key=progress]").value = job.progress;
            row.querySelector("[data-job-key=percent]").textContent = Math.round(100 * job.progress) + "%";
            row.querySelector("[data-job-key=message]").textContent = job.message;
            row.setAttribute("data-status", job.status);
            if (job.status === "queued" || job.status === "running") {
              setTimeout(tick, 1000);
            } else {
              // Finished: reload once to show the result, download link and diagnostics.
              window.location.reload();
            }
          })
          .catch(function () { setTimeout(tick, 3000); });
      }
      setTimeout(tick, 1000);
    });
  }

  // A thumbnail whose photo cannot be loaded (the COCO server unreachable from here, or an
  // https page refusing an http photo) becomes a "no photo" tile instead of a broken image.
  function noPhoto(img) {
    var tile = document.createElement("span");
    tile.className = "thumb no-photo";
    tile.textContent = "no photo";
    tile.title = img.getAttribute("alt") || "";
    img.replaceWith(tile);
  }
  document.addEventListener("error", function (event) {
    var img = event.target;
    if (img instanceof HTMLImageElement && img.classList.contains("thumb")) noPhoto(img);
  }, true);

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("img.thumb").forEach(function (img) {
      if (img.complete && img.naturalWidth === 0) noPhoto(img);
    });
    document.querySelectorAll("[data-poll]").forEach(pollNumbers);
    refreshImages();
    pollJobs();
  });
  // Forms that act on people (Block) ask first: data-confirm holds the question.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
    });
  });
  // Buttons that act on many rows at once (settle all matching a filter) ask first too.
  document.querySelectorAll("button[data-confirm]").forEach(function (button) {
    button.addEventListener("click", function (event) {
      if (!window.confirm(button.getAttribute("data-confirm"))) event.preventDefault();
    });
  });
  // Timestamps: the server writes UTC; show them in the viewer's own time zone.
  document.querySelectorAll("time.local[datetime]").forEach(function (el) {
    el.title = el.textContent;
    el.textContent = localTime(el.getAttribute("datetime"));
  });
  // Read-only link fields (settings): one click selects the whole link for copying.
  document.querySelectorAll("input.link[readonly], textarea.link[readonly]").forEach(function (el) {
    el.addEventListener("click", function () { el.select(); });
  });
})();
