// New job: "Run inside my GPU booking" offers only the bookings on the cluster of the template
// chosen in step 3 (a booking holds GPUs on one cluster). Start checks the same on the server;
// without JavaScript every booking is listed and a wrong one is refused in words.
(function () {
  "use strict";
  var select = document.getElementById("id_booking");
  if (!select) return;

  function cluster() {
    var checked = document.querySelector("input[name=template]:checked");
    var card = checked && checked.closest("[data-cluster]");
    return card ? card.dataset.cluster : "";
  }

  function filter() {
    var chosen = cluster();
    Array.prototype.forEach.call(select.options, function (option) {
      var other = Boolean(option.value && chosen && option.dataset.cluster !== chosen);
      option.disabled = other;
      option.hidden = other;
      if (other && option.selected) select.value = "";
    });
  }

  document.addEventListener("change", function (event) {
    if (event.target && event.target.name === "template") filter();
  });
  filter();
})();
