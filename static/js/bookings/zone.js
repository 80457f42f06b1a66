/**
 * The booking pages show times in the user's own time zone. The server cannot know it: this tells
 * it in a cookie (`ffp_tz`, read by jobs.web.views.bookings.user_zone), and when the page was drawn
 * in another zone (a first visit, or a trip), draws it again once, so that every time on the page,
 * and every time typed into the form, is in the zone the page names. Without JavaScript the page
 * stays in the site's zone, and says so.
 */
export const ZONE_COOKIE = "ffp_tz";

export function browserZone() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (e) {
    return "";
  }
}

export function useBrowserZone(doc, win) {
  const zone = browserZone();
  const shown = doc.getElementById("booking-zone");
  if (!zone || !/^[A-Za-z][A-Za-z0-9_+\/-]{0,63}$/.test(zone)) return;
  doc.cookie = ZONE_COOKIE + "=" + zone + "; path=/; max-age=31536000; SameSite=Lax"; // checked above: no ; or =
  if (!shown || shown.getAttribute("data-time-zone") === zone) return;
  // Once per zone and tab: a zone the server does not know must not reload the page for ever.
  const key = "ffp-tz-reloaded";
  try {
    if (win.sessionStorage.getItem(key) === zone) return;
    win.sessionStorage.setItem(key, zone);
  } catch (e) {
    return;
  }
  // A form being filled in is not thrown away: only a page nobody has typed into is drawn again.
  if (doc.querySelector(".msg-error")) return;
  win.location.reload();
}
