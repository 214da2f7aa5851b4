// Registry web UI: copy buttons, confirmations, auto-submitting sort. Pages work without it.
(function () {
  "use strict";

  var toast = null;
  var toastTimer = 0;

  function announce(message) {
    toast = toast || document.querySelector("[data-toast]");
    if (!toast) return;
    toast.textContent = message;
    toast.classList.add("is-visible");
    window.clearTimeout(toastTimer);
    toastTimer = window.setTimeout(function () { toast.classList.remove("is-visible"); }, 1800);
  }

  function textOf(element) {
    return "value" in element && element.tagName === "INPUT" ? element.value : element.textContent.trim();
  }

  // navigator.clipboard exists only in secure contexts (https, localhost); plain http falls back
  // to selecting the text and the legacy copy command.
  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    document.body.removeChild(area);
    return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () { return fallbackCopy(text); });
    }
    return fallbackCopy(text);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    copy(textOf(source)).then(function () {
      button.classList.add("is-copied");
      button.textContent = "Copied";
      announce("Copied to the clipboard");
      window.setTimeout(function () { button.classList.remove("is-copied"); button.textContent = "Copy"; }, 1800);
    }, function () {
      if (source.select) source.select();
      announce("Press Ctrl+C to copy");
    });
  });

  document.addEventListener("submit", function (event) {
    var button = event.submitter || event.target.querySelector("[data-confirm]");
    var question = button && button.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });

  document.addEventListener("change", function (event) {
    if (event.target.matches("select[data-autosubmit]") && event.target.form) event.target.form.submit();
  });

  document.addEventListener("DOMContentLoaded", function () {
    var focus = document.querySelector("[data-focus]");
    if (focus) focus.focus();
  });
})();
