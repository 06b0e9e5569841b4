// The caption task: live caption preview, type-to-filter, keyboard shortcuts, countdown.
// Plain JS, no dependencies (the study machines have no internet and no CDN).
(function () {
  "use strict";
  const form = document.getElementById("task-form");
  if (!form) return;
  const started = Date.now();
  const captions = JSON.parse(document.getElementById("captions-data").textContent);
  const preview = document.getElementById("caption-preview");
  const truth = document.getElementById("truth-preview");
  const hint = document.getElementById("form-hint");
  const filter = document.getElementById("filter");
  const count = document.getElementById("filter-count");
  const chips = Array.from(document.querySelectorAll('input[name="relation"]'));
  const photos = Array.from(document.querySelectorAll(".photo"));
  // The page's words in the study's language (gettext on the server, see generate.html).
  const t = JSON.parse(document.getElementById("i18n-strings").textContent);
  function fill(text, values) {
    return text.replace(/\{(\w+)\}/g, function (m, k) { return k in values ? String(values[k]) : m; });
  }

  function checked(name) {
    const el = document.querySelector('input[name="' + name + '"]:checked');
    return el ? el.value : null;
  }

  // The captions table comes from vsr_core.captions.render_caption on the server, so what the
  // annotator reads here is exactly what is stored.
  function update() {
    const rel = checked("relation"), ent1 = checked("ent1") || "a", img = checked("true_image");
    if (rel && captions[rel]) {
      preview.textContent = captions[rel][ent1];
      preview.classList.add("ready");
    } else {
      const first = form.dataset[ent1 === "a" ? "conceptA" : "conceptB"];
      const second = form.dataset[ent1 === "a" ? "conceptB" : "conceptA"];
      preview.textContent = fill(t.blank, {first: first, second: second});
      preview.classList.remove("ready");
    }
    document.querySelectorAll("[data-role-of]").forEach(function (el) {
      el.textContent = el.dataset.roleOf === ent1 ? "ENT1" : "ENT2";
    });
    truth.textContent = img ? fill(t.true_for, {a: img, b: img === "1" ? 2 : 1}) : "";
    photos.forEach(function (p) {
      const on = p.dataset.slot === img;
      p.classList.toggle("chosen-true", on);
      p.classList.toggle("chosen-false", !!img && !on);
      p.querySelector(".photo-verdict").textContent = img ? (on ? t["true"] : t["false"]) : "";
    });
    const missing = [];
    if (!rel) missing.push(t.a_relation);
    if (!img) missing.push(t.the_image);
    hint.textContent = missing.length ? fill(t.still, {what: missing.join(t.and)}) : t.ready;
    hint.classList.toggle("ok", !missing.length);
  }

  function applyFilter() {
    const q = filter.value.trim().toLowerCase();
    let shown = 0;
    chips.forEach(function (input) {
      // The relation's id (English) or its name as shown (the study's language).
      const label = input.nextElementSibling ? input.nextElementSibling.textContent.toLowerCase() : "";
      const ok = !q || input.value.indexOf(q) !== -1 || label.indexOf(q) !== -1;
      input.closest(".chip").hidden = !ok;
      if (ok) shown++;
    });
    document.querySelectorAll(".group").forEach(function (g) {
      g.hidden = !g.querySelector(".chip:not([hidden])");
    });
    count.textContent = q ? fill(shown === 1 ? t.match : t.matches, {n: shown}) : "";
  }

  function visibleChips() { return chips.filter(function (c) { return !c.closest(".chip").hidden; }); }

  function pick(input) { input.checked = true; input.focus(); update(); }

  function swap() {
    const other = document.querySelector('input[name="ent1"]:not(:checked)');
    if (other) { other.checked = true; update(); }
  }

  function typing(el) {
    return el && (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && (el.type === "search" || el.type === "text")));
  }

  form.addEventListener("change", update);
  document.addEventListener("change", update);
  document.getElementById("swap").addEventListener("click", swap);
  document.getElementById("skip-open").addEventListener("click", function () {
    const box = document.getElementById("skip-box");
    box.open = true;
    box.scrollIntoView({ block: "center" });
    const first = box.querySelector('input[name="skip_reason"]');
    if (first) first.focus();
  });
  filter.addEventListener("input", applyFilter);
  filter.addEventListener("keydown", function (e) {
    const vis = visibleChips();
    if ((e.key === "Enter" || e.key === "ArrowDown") && vis.length) {
      e.preventDefault();
      pick(vis[0]);
    } else if (e.key === "Escape") {
      filter.value = ""; applyFilter();
    }
  });

  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    const el = document.activeElement;
    if (typing(el)) return;
    if (e.key === "/") { e.preventDefault(); filter.focus(); filter.select(); }
    else if (e.key === "1" || e.key === "2") { e.preventDefault(); document.getElementById("true" + e.key).checked = true; update(); }
    else if (e.key === "s" || e.key === "S") { e.preventDefault(); swap(); }
    else if (e.key === "Enter" && !(el && el.closest && el.closest("#skip-box"))) {
      if (el && (el.tagName === "BUTTON" || el.tagName === "A" || el.tagName === "SUMMARY")) return;
      e.preventDefault();
      form.requestSubmit();
    }
  });

  // One click, one submission: the button is disabled while the request is in flight (the
  // server is idempotent anyway, via client_token).
  // How the answer was given (docs/quality.md; disclosed on the consent page): when both
  // photos were decoded and on screen, focus changes, counts of pointer and key events,
  // whether anything was pasted (never content) and whether a hidden canary was acted on.
  const seen = { shownAt: null, focus: 0, pointer: 0, keys: 0, paste: 0, canary: 0 };
  const markShown = function () {
    requestAnimationFrame(function () { if (seen.shownAt === null) seen.shownAt = Date.now(); });
  };
  // A fresh Image of each photo's source decodes whether or not the page's copy already
  // loaded (an SVG <image> has no "complete" to ask); a failed decode still counts as shown,
  // as the broken photo is on screen and the person can say so by skipping.
  const sources = Array.from(document.querySelectorAll(".photo img, .photo svg image")).map(
    function (el) { return el.tagName.toLowerCase() === "img" ? el.currentSrc || el.src : el.href.baseVal; }
  );
  Promise.all(sources.map(function (src) {
    const im = new Image();
    im.src = src;
    return im.decode().catch(function () { return null; });
  })).then(markShown);
  window.addEventListener("blur", function () { seen.focus++; });
  document.addEventListener("visibilitychange", function () { if (document.hidden) seen.focus++; });
  document.addEventListener("pointerdown", function () { seen.pointer++; }, { passive: true });
  document.addEventListener("pointermove", function () { seen.pointer++; }, { passive: true });
  document.addEventListener("keydown", function () { seen.keys++; }, true);
  document.addEventListener("paste", function () { seen.paste = 1; }, true);
  const canary = document.getElementById("g-canary-btn");
  if (canary) canary.addEventListener("click", function () { seen.canary = 1; });
  function signals() {
    const cap = function (n, max) { return String(Math.min(Math.max(0, n), max)); };
    const now = Date.now();
    const shown = seen.shownAt === null ? "none" : cap(now - seen.shownAt, 86400000);
    return "shown=" + shown + ";focus=" + cap(seen.focus, 9999) +
      ";pointer=" + cap(seen.pointer, 999999) + ";keys=" + cap(seen.keys, 999999) +
      ";canary=" + seen.canary + ";paste=" + seen.paste;
  }
  document.querySelectorAll("form").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (f.dataset.sent) { e.preventDefault(); return; }
      const d = f.querySelector('input[name="duration_ms"]');
      if (d) d.value = String(Date.now() - started);
      const sig = f.querySelector('input[name="signals"]');
      if (sig) sig.value = signals();
      f.dataset.sent = "1";
      f.querySelectorAll("button[type=submit], button:not([type])").forEach(function (b) { b.disabled = true; });
    });
  });
  form.addEventListener("invalid", function () {
    update();
    hint.classList.add("error");
  }, true);

  // Countdown of the batch's time; at zero the server closes the batch and shows the code.
  const clock = document.getElementById("countdown");
  if (clock) {
    const end = Date.now() + 1000 * parseInt(clock.dataset.seconds || "0", 10);
    const tick = function () {
      const left = Math.max(0, Math.round((end - Date.now()) / 1000));
      // Minutes:seconds even above an hour ("79:30"): the batch time is given in minutes.
      clock.textContent = Math.floor(left / 60) + ":" + String(left % 60).padStart(2, "0");
      clock.classList.toggle("low", left < 300);
      if (left === 0) { window.location.href = window.location.pathname; return; }
      setTimeout(tick, 1000);
    };
    tick();
  }
  update();
})();
