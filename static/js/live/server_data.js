// What the server wrote into the page for this script: where to connect, and the lists and mappings
// the server defines once in Python (jobs/web/templatetags/live.py) and hands over as data-*
// attributes or a json_script block. The script keeps no copy of its own, so it can never colour a
// state or end a job differently from the page the server rendered.

function spaceList(root, name) {
  return (root.getAttribute(name) || "").split(/\s+/).filter(Boolean);
}

// A json_script block (<script type="application/json">): data, which the browser never runs.
function jsonBlock(id) {
  const node = document.getElementById(id);
  if (!node) return null;
  try {
    return JSON.parse(node.textContent);
  } catch (e) {
    return null;
  }
}

/** Everything the server told the script about the page under `root` (#job-live or #jobs-live). */
export function serverData(root) {
  const finalStatuses = spaceList(root, "data-final-statuses");
  const failedStatuses = spaceList(root, "data-failed-statuses");
  const retryStatuses = spaceList(root, "data-retry-statuses");
  const videoExtensions = spaceList(root, "data-video-extensions");
  // the `task_state_class` filter as data: {"states": {STATE: colour}, "other": colour}
  const taskClasses = jsonBlock("task-state-classes") || {};
  const taskStates = taskClasses.states || {};
  const taskGroups = taskClasses.groups || {};
  const whole = (name, fallback) => Math.max(1, parseInt(root.getAttribute(name), 10) || fallback);
  const taskStateClass = (state) => {
    const key = (state || "").toUpperCase();
    return Object.prototype.hasOwnProperty.call(taskStates, key) ? taskStates[key] : taskClasses.other || "";
  };
  return Object.freeze({
    wsPath: root.getAttribute("data-ws-path"),
    liveUrl: root.getAttribute("data-live-url"),
    timeZone: root.getAttribute("data-time-zone") || undefined,
    // The consumers' refusals (logged out; no such job for this user). NaN when the page has none,
    // which matches no close code: the connection then just reconnects.
    closeCodes: Object.freeze({
      unauthenticated: parseInt(root.getAttribute("data-close-unauthenticated"), 10),
      notFound: parseInt(root.getAttribute("data-close-not-found"), 10),
    }),
    /** A job status after which nothing changes any more. */
    isFinal: (status) => finalStatuses.includes(status),
    /** A job status a user may retry from (jobs.job.retry), when something is not done. */
    canRetry: (status) => retryStatuses.includes(status),
    /** A job status whose error is bad news (a red notice) rather than information. */
    isFailed: (status) => failedStatuses.includes(status),
    /** Whether a file name is a video's (no thumbnail of its own). */
    isVideo: (name) => {
      const lower = (name || "").toLowerCase();
      return videoExtensions.some((ext) => lower.slice(-ext.length) === ext);
    },
    /** A Slurm task state's badge colour (CSS class task-<colour>), as the server colours it. */
    taskStateClass: taskStateClass,
    /** The task filter a state belongs to (done, running, waiting, failed, cancelled). */
    taskGroup: (state) => taskGroups[taskStateClass(state)] || "",
    // The rows in view (jobs/live/view.py): the filter and page of each list, as the server drew them.
    targetsView: Object.freeze({
      show: root.getAttribute("data-targets-show") || "all",
      page: whole("data-targets-page", 1),
      perPage: whole("data-targets-per-page", 48),
      statuses: spaceList(root, "data-targets-statuses"), // empty: every status
    }),
    tasksView: Object.freeze({
      show: root.getAttribute("data-tasks-show") || "all",
      page: whole("data-tasks-page", 1),
      perPage: whole("data-tasks-per-page", 50),
    }),
  });
}
