// The completion page: copy the code with one click (the Clipboard API where the page is a
// secure context, else the selection and the older copy command).
(function () {
  "use strict";
  const button = document.getElementById("copy-code");
  if (!button) return;
  const status = document.getElementById("copy-status");
  // The page's words in the study's language (gettext on the server, see done.html).
  const t = JSON.parse(document.getElementById("i18n-strings").textContent);
  const code = button.dataset.code || "";
  function fallback() {
    const box = document.getElementById("completion-code");
    const range = document.createRange();
    range.selectNodeContents(box);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    return document.execCommand && document.execCommand("copy");
  }
  function said(ok) {
    status.textContent = ok ? t.copied : t.select;
  }
  button.addEventListener("click", function () {
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(code).then(function () { said(true); },
        function () { said(fallback()); });
    } else {
      said(fallback());
    }
  });
})();
