// The booking pages: the user's time zone (static/js/bookings/zone.js), "Are you sure?" before
// Cancel, and on Book GPUs the heat map and the suggestions fill the start in place
// (static/js/bookings/heatmap.js). No inline script (CSP).
import { guardConfirm } from "../live/dom.js";
import { setUpStartPicker } from "./heatmap.js";
import { useBrowserZone } from "./zone.js";

useBrowserZone(document, window);
guardConfirm(document);
const form = document.getElementById("booking-form");
if (form) setUpStartPicker(document, form);
