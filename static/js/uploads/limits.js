// How many photos and videos one job may have, checked on the page as files are chosen or a folder
// is counted, so that a job over a limit is refused next to its field before Start, never started
// to fail. The limits and the very words Start refuses with come in #targets-limits
// (jobs.quotas.targets_limits): the user's quota, and each cluster's own limit.

const source = document.getElementById("targets-limits");
let limits = {};
try {
  limits = source ? JSON.parse(source.textContent) || {} : {};
} catch (e) {
  limits = {};
}

/** 1000 -> "1,000", as the server writes counts. */
function thousands(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** The slug of the cluster of the template chosen (templates may run on different clusters). */
function chosenCluster() {
  const checked = document.querySelector("input[name=template]:checked");
  const card = checked && checked.closest("[data-cluster]");
  return card ? card.dataset.cluster : "";
}

/** Why a job of `count` photos and videos cannot start ("" when it can), in the words of the
 * tightest limit it is over; `inFolder`: they are the files of the target folder. */
export function overLimit(count, inFolder = false) {
  const over = [];
  const quota = limits.quota;
  if (quota && count > quota.limit) over.push([quota.limit, inFolder ? quota.folder : quota.files]);
  const cluster = (limits.clusters || {})[chosenCluster()];
  if (cluster && count > cluster.limit) over.push([cluster.limit, cluster.text]);
  if (!over.length) return "";
  over.sort((a, b) => a[0] - b[0]);
  return over[0][1].replace("{count}", thousands(count));
}
