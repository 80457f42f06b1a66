// The New job page's inline folder browser. Without JavaScript the Browse button opens the
// folder page, whose "Use" buttons come back here with ?target_folder=...; with it, the listing
// opens in place so the files already chosen in this form are kept.
(function () {
  "use strict";
  var button = document.getElementById("browse-button");
  var panel = document.getElementById("folder-browser");
  var input = document.getElementById("id_target_folder");
  if (!button || !panel || !input) return;
  var base = button.getAttribute("href").split("?")[0];

  // Browse the cluster of the template chosen in step 3 (templates may run on different clusters).
  function cluster() {
    var checked = document.querySelector("input[name=template]:checked");
    var card = checked && checked.closest("[data-cluster]");
    return card ? card.dataset.cluster : "";
  }

  function load(path) {
    var url = base + "?partial=1" + (path ? "&path=" + encodeURIComponent(path) : "");
    if (cluster()) url += "&cluster=" + encodeURIComponent(cluster());
    panel.hidden = false;
    panel.setAttribute("aria-busy", "true");
    fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) { return r.text(); })
      .then(function (html) { panel.innerHTML = html; })
      .catch(function () { panel.textContent = panel.dataset.offline || "The folder list could not be loaded."; })
      .finally(function () { panel.removeAttribute("aria-busy"); });
  }

  button.addEventListener("click", function (ev) {
    ev.preventDefault();
    if (!panel.hidden && panel.innerHTML) { panel.hidden = true; return; }
    load(input.value.trim());
  });
  panel.addEventListener("click", function (ev) {
    var link = ev.target.closest("a");
    if (!link || !panel.contains(link)) return;
    if (link.classList.contains("folder-link")) {
      ev.preventDefault();
      load(link.dataset.path);
    } else if (link.classList.contains("use-folder")) {
      ev.preventDefault();
      input.value = link.dataset.path;
      input.dispatchEvent(new Event("change", { bubbles: true })); // the folder is checked (uploads/folder.js)
      panel.hidden = true;
      input.focus();
    }
  });
})();
