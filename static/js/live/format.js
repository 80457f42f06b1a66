// Numbers, times and text as the server's templates write them, so a value the script draws later
// looks like the one the server drew first.

/** A finite number, or 0 (a missing or odd value in a message never breaks a drawing). */
export function num(value) {
  const n = Number(value);
  return isFinite(n) ? n : 0;
}

/** 1000 -> "1,000", as the server's `thousands` filter writes counts (jobs/web/templatetags/portal.py). */
export function thousands(n) {
  return String(Math.round(num(n))).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** Whole percent of `total`; 0 when there is no total yet. */
export function pct(part, total) {
  return total ? Math.round((100 * part) / total) : 0;
}

/** At most `n` characters, the last one an ellipsis when cut (the `truncatechars` filter). */
export function truncate(text, n) {
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

function two(n) {
  return (n < 10 ? "0" : "") + n;
}

/** Seconds as H:MM:SS, like the `duration` template filter; "" when unknown. */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || seconds === "") return "";
  const s = Math.floor(num(seconds));
  return Math.floor(s / 3600) + ":" + two(Math.floor((s % 3600) / 60)) + ":" + two(s % 60);
}

/** Whether two ISO times are the same instant (both missing counts as the same). */
export function sameInstant(a, b) {
  return (!a && !b) || (!!a && !!b && Date.parse(a) === Date.parse(b));
}

/** The time of day as the server writes it in its messages: 14:05:09 UTC. */
export function utcClock(iso) {
  const d = new Date(iso);
  return two(d.getUTCHours()) + ":" + two(d.getUTCMinutes()) + ":" + two(d.getUTCSeconds()) + " UTC";
}

/**
 * A date as the server writes it on the job pages (`date:"Y-m-d H:i"`): 2026-12-01 14:05, in the
 * page's time zone, in every language (one format on the list and the job page). "" for no date.
 */
export function pageDate(iso, timeZone) {
  const d = new Date(iso);
  if (!iso || isNaN(d)) return "";
  const options = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
                    hourCycle: "h23", timeZone: timeZone };
  let parts;
  try {
    parts = new Intl.DateTimeFormat("en-US", options).formatToParts(d);
  } catch (e) { // a time zone this browser does not know: the browser's own
    parts = new Intl.DateTimeFormat("en-US", { ...options, timeZone: undefined }).formatToParts(d);
  }
  const p = {};
  for (const part of parts) p[part.type] = part.value;
  return p.year + "-" + p.month + "-" + p.day + " " + (p.hour === "24" ? "00" : p.hour) + ":" + p.minute;
}

/** The dates the server wrote get the same style as the ones the script writes later. */
export function formatDates(root, timeZone) {
  for (const time of root.querySelectorAll("time[datetime]")) {
    const text = pageDate(time.getAttribute("datetime"), timeZone);
    if (text) time.textContent = text;
  }
}

/**
 * The job's bar widths and percentage, as the server's progress_pct (jobs/web/views/pages.py):
 * each running video (`frames`: [{done, total}]) adds its share of frames done, at most 0.99.
 */
export function progressPct(done, failed, total, frames) {
  done = num(done); failed = num(failed); total = num(total);
  if (!total) return { done_pct: 0, failed_pct: 0, pct: 0 };
  let share = 0;
  for (const f of frames || []) {
    if (f && num(f.total)) share += Math.min(num(f.done) / num(f.total), 0.99);
  }
  return {
    done_pct: Math.round((100 * (done + share)) / total),
    failed_pct: Math.round((100 * failed) / total),
    pct: Math.min(Math.round((100 * (done + failed + share)) / total), 100),
  };
}

/**
 * The time a video still needs at its pace so far (`seconds` spent on `done` frames of `total`);
 * null before its first frames or when its length is unknown. The server's twin is
 * jobs.models.job.seconds_left.
 */
export function secondsLeft(seconds, done, total) {
  seconds = num(seconds); done = num(done); total = num(total);
  if (!seconds || !done || !total || done >= total) return null;
  return (seconds * (total - done)) / done;
}

/**
 * A time left as a person would round it: {unit: "s", n: 40}, {unit: "min", n: 3} or
 * {unit: "h", n: 2}. Seconds go by 5 (at least 5), minutes from 90 s on, hours from 90 minutes on.
 */
export function roughTime(seconds) {
  const s = Math.max(0, num(seconds));
  if (s < 90) return { unit: "s", n: Math.max(5, Math.round(s / 5) * 5) };
  if (s < 90 * 60) return { unit: "min", n: Math.round(s / 60) };
  return { unit: "h", n: Math.round(s / 3600) };
}
