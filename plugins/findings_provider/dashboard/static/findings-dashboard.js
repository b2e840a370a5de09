/*
 * The findings dashboard: a React app rendered inside Airflow's UI (Airflow 3 `react_apps`).
 *
 * No build step: an ES module that uses the React, React Router and Chakra UI that Airflow's UI shares with its
 * plugins (globalThis.React, .ReactRouterDOM, .ChakraUI), so the pages take Airflow's own typography, colours,
 * light and dark mode and navigation. Every value is rendered as a React text node (escaped); every number comes
 * from the plugin's JSON API (`/findings-dashboard/api/...`) and links to the findings list that reproduces it.
 *
 * Airflow keys a loaded component by the react app's name: the names below are the plugin's
 * (`findings_provider/dashboard/links.py`, APP_NAMES; a test checks they agree).
 */
const React = globalThis.React;
const Router = globalThis.ReactRouterDOM;
const UI = globalThis.ChakraUI;
const h = React.createElement;
const { useEffect, useState } = React;

const APP_NAMES = {
  nav: "Findings",
  dag: "Findings of this DAG",
  dag_run: "What this run did",
  dashboard: "Findings programme",
};
const PAGES = [
  ["", "Overview"],
  ["findings", "Findings"],
  ["repositories", "Repositories"],
  ["scans", "Scans"],
  ["activity", "Triage and tickets"],
  ["policies", "Policies"],
  ["inventory", "Inventory"],
  ["reports", "Reports"],
];
const NAV_PATH = "/plugin/findings";
const TYPE_LABELS = { sast: "Code", sca: "Supply chain", secrets: "Secrets", ai_sast: "AI code" };
const SEVERITY_PALETTE = { critical: "red", high: "orange", medium: "yellow", low: "blue" };
// Each sort (programme.SORTS): its value, its label, and its two orders named by what comes first, the ascending
// one ("", programme.order_by) then the descending one ("desc"): "Ascending" alone would not say that an ascending
// age sort lists the oldest first.
const SORTS = [
  ["severity", "Severity", ["Most severe first", "Least severe first"]],
  ["age", "Age", ["Oldest first", "Newest first"]],
  ["due", "Due date", ["Due earliest first", "Due latest first"]],
  ["repository", "Repository", ["A to Z", "Z to A"]],
  ["rule", "Rule", ["A to Z", "Z to A"]],
  ["id", "Type and id", ["Ascending", "Descending"]],
];
const orderChoices = (sort) => {
  const [ascending, descending] = (SORTS.find(([value]) => value === sort) || SORTS[SORTS.length - 1])[2];
  return [["", ascending], ["desc", descending]];
};
const MEASURES = [
  ["", "any"],
  ["open", "Open"],
  ["overdue", "Past fix-time target"],
  ["triaged", "Triaged"],
  ["ticketed", "Ticketed"],
  ["fixed", "Fixed"],
];
const FILTER_FIELDS = ["measure", "issue_type", "severity", "status", "repository", "repository_contains", "rule",
  "rule_contains", "run_id", "touched", "branches"];
//: Which copies of a finding found on several branches are counted (programme.BRANCH_VIEWS).
const BRANCH_CHOICES = [["", "One per finding, as the service counts"], ["all", "Every branch's copy"]];

// --- data ---------------------------------------------------------------------------------------------------

function apiBase() {
  return new URL("findings-dashboard/", document.baseURI).href;
}

function apiUrl(path, params) {
  const query = new URLSearchParams(Object.entries(params || {}).filter(([, v]) => v !== "" && v != null));
  const text = query.toString();
  return apiBase() + path + (text ? "?" + text : "");
}

function useApi(path, params) {
  const url = apiUrl(path, params);
  const [state, setState] = useState({ url: null, data: null, error: null });
  useEffect(() => {
    let live = true;
    setState({ url, data: null, error: null });
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(async (response) => {
        const body = await response.json().catch(() => ({}));
        if (!response.ok) {
          throw new Error(body.detail ? String(body.detail) : `${response.status} ${response.statusText}`);
        }
        return body;
      })
      .then((data) => live && setState({ url, data, error: null }))
      .catch((error) => live && setState({ url, data: null, error: String(error.message || error) }));
    return () => {
      live = false;
    };
  }, [url]);
  return state.url === url ? state : { url, data: null, error: null };
}

// --- formatting ---------------------------------------------------------------------------------------------

function num(value) {
  return value == null ? "-" : Number(value).toLocaleString("en-US");
}

function when(iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

function duration(seconds) {
  if (seconds == null) return "-";
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

function words(value) {
  if (value == null || value === "") return "-";
  const text = String(value).replaceAll("_", " ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function typeLabel(issueType) {
  return TYPE_LABELS[issueType] || words(issueType);
}

function findingsPath(query) {
  return viewPath("findings", query);
}

function viewPath(view, query) {
  const params = new URLSearchParams(Object.entries({ view, ...(query || {}) }).filter(([, v]) => v !== "" && v != null));
  const text = params.toString();
  return NAV_PATH + (text ? "?" + text : "");
}

// --- building blocks ----------------------------------------------------------------------------------------

function InLink({ to, children }) {
  return h(UI.Link, { asChild: true, color: "fg.info", fontWeight: "medium" }, h(Router.Link, { to }, children));
}

function OutLink({ href, children }) {
  if (!href) return h(React.Fragment, null, children);
  return h(UI.Link, { href, target: "_blank", rel: "noopener noreferrer", color: "fg.info" }, children);
}

function Count({ value, query, emphasis }) {
  const text = h(UI.Text, { as: "span", fontWeight: "semibold", color: emphasis && value ? "fg.error" : undefined },
    num(value));
  return query ? h(InLink, { to: findingsPath(query) }, text) : text;
}

function SeverityBadge({ severity }) {
  return h(UI.Badge, { colorPalette: SEVERITY_PALETTE[severity] || "gray", variant: "solid" }, words(severity || "unknown"));
}

function Loading({ state, children }) {
  if (state.error) {
    return h(UI.Alert.Root, { status: "error", my: 2 },
      h(UI.Alert.Indicator, null),
      h(UI.Alert.Content, null, h(UI.Alert.Title, null, "The dashboard's data could not be read"),
        h(UI.Alert.Description, null, state.error)));
  }
  if (!state.data) return h(UI.Spinner, { size: "sm", my: 4, "data-testid": "findings-loading" });
  return children(state.data);
}

function Section({ title, children, aside }) {
  return h(UI.Box, { as: "section", mt: 6 },
    h(UI.HStack, { justify: "space-between", mb: 2 }, h(UI.Heading, { size: "md", as: "h3" }, title), aside || null),
    children);
}

function Muted({ children }) {
  return h(UI.Text, { color: "fg.muted", fontSize: "sm" }, children);
}

//: Says which copies the numbers below count, with a link to the other view (the page's ``branches`` param).
function BranchView({ view, params, setParams }) {
  if (!view) return null;
  const other = () => {
    const next = new URLSearchParams(params);
    if (view.other) next.set("branches", view.other); else next.delete("branches");
    setParams(next);
  };
  return h(UI.HStack, { gap: 2, wrap: "wrap", mb: 2, "data-testid": "branch-view" },
    h(UI.Text, { fontSize: "sm", color: "fg.muted" }, `${view.label}.`),
    h(UI.Button, { size: "xs", variant: "outline", onClick: other }, `Show: ${view.other_label.toLowerCase()}`));
}

function DataTable({ columns, rows, empty, rowKey }) {
  if (!rows || rows.length === 0) return h(Muted, null, empty || "Nothing yet.");
  return h(UI.Box, { overflowX: "auto", borderWidth: "1px", borderColor: "border", borderRadius: "md" },
    h(UI.Table.Root, { size: "sm", striped: true, stickyHeader: true },
      h(UI.Table.Header, null, h(UI.Table.Row, null, columns.map((c) =>
        h(UI.Table.ColumnHeader, { key: c.title, textAlign: c.numeric ? "end" : "start", whiteSpace: "nowrap" },
          c.title)))),
      h(UI.Table.Body, null, rows.map((row, i) => h(UI.Table.Row, { key: rowKey ? rowKey(row) : i },
        columns.map((c) => h(UI.Table.Cell, { key: c.title, textAlign: c.numeric ? "end" : "start",
          whiteSpace: c.nowrap || c.numeric ? "nowrap" : undefined },
          c.render ? c.render(row) : row[c.key] == null ? "-" : String(row[c.key]))))))));
}

function Stat({ label, value, query, to, help, emphasis }) {
  const shown = h(UI.Text, { fontSize: "2xl", fontWeight: "bold", color: emphasis && value ? "fg.error" : "fg" },
    num(value));
  const target = to || (query ? findingsPath(query) : null);
  return h(UI.Box, { borderWidth: "1px", borderColor: emphasis && value ? "border.error" : "border",
      borderRadius: "md", p: 3, minW: "10rem", bg: "bg.panel" },
    h(UI.Text, { fontSize: "sm", color: "fg.muted" }, label),
    target ? h(InLink, { to: target }, shown) : shown,
    help ? h(UI.Text, { fontSize: "xs", color: "fg.muted" }, help) : null);
}

function Select({ label, value, options, onChange, name }) {
  return h(UI.Box, null,
    h(UI.Text, { as: "label", fontSize: "xs", color: "fg.muted", htmlFor: `findings-${name}` }, label),
    h(UI.NativeSelect.Root, { size: "sm", width: "auto", minW: "9rem" },
      h(UI.NativeSelect.Field, { id: `findings-${name}`, name, value, onChange: (e) => onChange(e.target.value) },
        options.map(([v, text]) => h("option", { key: v, value: v }, text))),
      h(UI.NativeSelect.Indicator, null)));
}

function TextFilter({ label, name, value, suggestions, onCommit }) {
  const [text, setText] = useState(value);
  useEffect(() => setText(value), [value]);
  return h(UI.Box, null,
    h(UI.Text, { as: "label", fontSize: "xs", color: "fg.muted", htmlFor: `findings-${name}` }, label),
    h(UI.Input, { id: `findings-${name}`, name, size: "sm", value: text, list: `findings-${name}-values`,
      placeholder: "part of a name", onChange: (e) => setText(e.target.value),
      onBlur: () => text !== value && onCommit(text),
      onKeyDown: (e) => e.key === "Enter" && onCommit(text) }),
    h("datalist", { id: `findings-${name}-values` }, (suggestions || []).map((s) => h("option", { key: s, value: s }))));
}

function useTitle(title) {
  useEffect(() => {
    document.title = `${title} - Findings - Airflow`;
  }, [title]);
}

// --- overview -----------------------------------------------------------------------------------------------

function Trend({ trend }) {
  const days = trend.days;
  if (!days.length) return h(Muted, null, "No history yet: the findings_extraction DAG records a snapshot per day.");
  const width = 760, height = 220, left = 70, bottom = 28, top = 8, right = 8;
  const totals = days.map((_, i) => trend.severities.reduce((sum, s) => sum + trend.series[s][i], 0));
  const peak = Math.max(1, ...totals);
  const magnitude = Math.pow(10, Math.floor(Math.log10(peak)));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => peak / s <= 5) || magnitude * 10;
  const yMax = Math.ceil(peak / step) * step;
  const plotH = height - top - bottom, plotW = width - left - right;
  const slot = plotW / days.length, bar = Math.max(Math.min(slot * 0.8, 40), 2);
  const y = (v) => top + plotH - (v / yMax) * plotH;
  const ticks = [];
  for (let v = 0; v <= yMax; v += step) ticks.push(v);
  const labelEvery = Math.max(1, Math.ceil(days.length / 8));
  const shapes = [];
  days.forEach((day, i) => {
    let base = 0;
    trend.severities.forEach((s) => {
      const v = trend.series[s][i];
      if (!v) return;
      shapes.push(h("rect", { key: `${day}-${s}`, x: left + i * slot + (slot - bar) / 2, y: y(base + v), width: bar,
        height: Math.max(y(base) - y(base + v), 0.5),
        fill: `var(--chakra-colors-${SEVERITY_PALETTE[s] || "gray"}-500)` },
      h("title", null, `${day} ${s}: ${num(v)}`)));
      base += v;
    });
  });
  return h(UI.Box, null,
    trend.short ? h(UI.Alert.Root, { status: "info", mb: 2, size: "sm" }, h(UI.Alert.Indicator, null),
      h(UI.Alert.Title, null,
        `History starts on ${days[0]}: ${days.length} day${days.length === 1 ? "" : "s"} recorded so far. ` +
        "The trend fills in with each day's extraction.")) : null,
    h("svg", { role: "img", "aria-label": "open findings per day by severity", viewBox: `0 0 ${width} ${height}`,
        width: "100%", style: { maxWidth: `${width}px`, color: "var(--chakra-colors-fg-muted)" } },
      ticks.map((v) => h("g", { key: `t${v}` },
        h("line", { x1: left, x2: width - right, y1: y(v), y2: y(v), stroke: "var(--chakra-colors-border)" }),
        h("text", { x: left - 6, y: y(v) + 4, textAnchor: "end", fontSize: 11, fill: "currentColor" }, num(v)))),
      shapes,
      days.map((day, i) => (i % labelEvery === 0 || i === days.length - 1) ? h("text", { key: `d${day}`,
        x: left + i * slot + slot / 2, y: height - 8, textAnchor: "middle", fontSize: 11, fill: "currentColor" },
      day.slice(5)) : null),
      h("text", { x: 12, y: top + plotH / 2, fontSize: 11, fill: "currentColor",
        transform: `rotate(-90 12 ${top + plotH / 2})`, textAnchor: "middle" }, "open findings")),
    h(UI.HStack, { gap: 3, mt: 1, wrap: "wrap" }, trend.severities.map((s) => h(SeverityBadge, { key: s, severity: s }))));
}

function MeasureTable({ measures }) {
  const severities = measures[0] ? measures[0].by_severity.map((b) => b.severity) : [];
  const columns = [
    { title: "", render: (m) => m.label },
    { title: "Total", numeric: true, render: (m) => h(Count, { value: m.total, query: m.query, emphasis: m.name === "overdue" }) },
    ...severities.map((s, i) => ({ title: words(s || "unknown"), numeric: true,
      render: (m) => h(Count, { value: m.by_severity[i].count, query: m.by_severity[i].query,
        emphasis: m.name === "overdue" }) })),
  ];
  return h(DataTable, { columns, rows: measures, rowKey: (m) => m.name });
}

function Approvals({ approvals }) {
  if (approvals == null) return h(Muted, null, "Airflow's metadata database cannot be read here.");
  return h(DataTable, {
    empty: "No approval is waiting.",
    rows: approvals,
    columns: [
      { title: "Request", render: (a) => h(InLink, { to: `/dags/${encodeURIComponent(a.dag_id)}/runs/` +
        `${encodeURIComponent(a.run_id)}/tasks/${encodeURIComponent(a.task_id)}/required_actions` +
        (a.map_index >= 0 ? `?map_index=${a.map_index}` : "") }, a.subject || a.task_id) },
      { title: "DAG", key: "dag_id" },
      { title: "Run", key: "run_id" },
      { title: "Asked", render: (a) => when(a.created_at) },
    ],
  });
}

function DurationTable({ rows, empty }) {
  return h(DataTable, { rows: rows || [], empty, columns: [
    { title: "Severity", render: (r) => h(SeverityBadge, { severity: r.severity }) },
    { title: "Findings", numeric: true, render: (r) => num(r.findings) },
    { title: "Median (days)", numeric: true, key: "median_days" },
    { title: "90th percentile (days)", numeric: true, key: "p90_days" },
  ] });
}

function Overview({ params, setParams }) {
  useTitle("Overview");
  const branches = params ? params.get("branches") || "" : "";
  const state = useApi("api/overview", { branches });
  return h(Loading, { state }, (d) => {
    const byName = Object.fromEntries(d.measures.map((m) => [m.name, m]));
    const targets = Object.entries(d.targets).map(([s, n]) => `${s} ${n} d`).join(", ") || "none";
    return h(UI.Box, null,
      h(BranchView, { view: d.view, params, setParams }),
      h(Muted, null, `Counted at ${when(d.as_of)} from the warehouse. Fix-time targets: ${targets}.`),
      h(UI.Flex, { gap: 3, wrap: "wrap", mt: 3 },
        h(Stat, { label: "Open", value: byName.open.total, query: byName.open.query }),
        h(Stat, { label: "Past fix-time target", value: byName.overdue.total, query: byName.overdue.query,
          emphasis: true, help: `${num(byName.overdue.by_severity.find((b) => b.severity === "critical")?.count)} critical` }),
        h(Stat, { label: "Failed scans", value: d.failed_scans.count, emphasis: true,
          to: viewPath("scans", { status: "failed" }), help: `last ${d.failed_scans.days} days` }),
        h(Stat, { label: "Approvals waiting", value: d.approvals == null ? null : d.approvals.length,
          emphasis: true, to: "#approvals" }),
        h(Stat, { label: "Ticketed", value: byName.ticketed.total, query: byName.ticketed.query }),
        h(Stat, { label: "Fixed", value: byName.fixed.total, query: byName.fixed.query })),
      h(Section, { title: "Findings by severity" }, h(MeasureTable, { measures: d.measures })),
      h(Section, { title: "Open findings by type" }, h(UI.Flex, { gap: 3, wrap: "wrap" },
        d.by_type.map((t) => h(Stat, { key: t.issue_type, label: typeLabel(t.issue_type), value: t.count, query: t.query })))),
      h(Section, { title: "Open findings per day" }, h(Trend, { trend: d.trend })),
      h(UI.Box, { id: "approvals" }, h(Section, { title: "Approvals waiting" }, h(Approvals, { approvals: d.approvals }))),
      h(Section, { title: "Time to fix" }, h(DurationTable, { rows: d.metrics.time_to_fix,
        empty: "No metrics yet: the findings_extraction DAG's summary task computes them." })),
      h(Section, { title: "Time to triage" }, h(DurationTable, { rows: d.metrics.time_to_triage,
        empty: "No metrics yet." })),
      d.metrics.run_id ? h(Muted, null, `Times computed by run ${d.metrics.run_id} at ${when(d.metrics.computed_at)}.`) : null);
  });
}

// --- findings -----------------------------------------------------------------------------------------------

function Findings({ params, setParams }) {
  useTitle("Findings");
  const query = Object.fromEntries(FILTER_FIELDS.map((f) => [f, params.get(f) || ""]));
  const sort = params.get("sort") || "severity";
  const order = params.get("order") || "";
  const offset = Number(params.get("offset") || 0);
  const state = useApi("api/findings", { ...query, sort, order, offset });
  const update = (changes) => {
    const next = new URLSearchParams(params);
    Object.entries(changes).forEach(([k, v]) => (v ? next.set(k, v) : next.delete(k)));
    if (!("offset" in changes)) next.delete("offset");
    setParams(next);
  };
  return h(Loading, { state }, (d) => {
    const o = d.options;
    const choice = (values, label = words) => [["", "any"], ...values.map((v) => [v, label(v)])];
    const first = d.total ? d.offset + 1 : 0, last = d.offset + d.rows.length;
    const csv = apiUrl("api/findings.csv", { ...query, sort, order });
    return h(UI.Box, null,
      query.run_id ? h(UI.Alert.Root, { status: "info", mb: 3, size: "sm" }, h(UI.Alert.Indicator, null),
        h(UI.Alert.Title, null, `Findings ${query.touched === "ticket" ? "ticketed" : "triaged"} by run ${query.run_id}`),
        h(UI.Button, { size: "xs", variant: "outline", ml: "auto", onClick: () => update({ run_id: "", touched: "" }) },
          "Show all")) : null,
      h(UI.Flex, { gap: 3, wrap: "wrap", align: "end", as: "form", role: "search",
          onSubmit: (e) => e.preventDefault() },
        h(Select, { label: "Measure", name: "measure", value: query.measure, options: MEASURES,
          onChange: (v) => update({ measure: v }) }),
        h(Select, { label: "Type", name: "issue_type", value: query.issue_type, options: choice(o.issue_type, typeLabel),
          onChange: (v) => update({ issue_type: v }) }),
        h(Select, { label: "Severity", name: "severity", value: query.severity, options: choice(o.severity),
          onChange: (v) => update({ severity: v }) }),
        h(Select, { label: "Status", name: "status", value: query.status, options: choice(o.status),
          onChange: (v) => update({ status: v }) }),
        h(TextFilter, { label: "Repository", name: "repository_contains",
          value: query.repository_contains || query.repository, suggestions: o.repository,
          onCommit: (v) => update({ repository_contains: v, repository: "" }) }),
        h(TextFilter, { label: "Rule", name: "rule_contains", value: query.rule_contains || query.rule,
          suggestions: o.rule, onCommit: (v) => update({ rule_contains: v, rule: "" }) }),
        h(Select, { label: "Copies", name: "branches", value: query.branches, options: BRANCH_CHOICES,
          onChange: (v) => update({ branches: v }) }),
        h(Select, { label: "Sort by", name: "sort", value: sort, options: SORTS, onChange: (v) => update({ sort: v }) }),
        h(Select, { label: "Order", name: "order", value: order, options: orderChoices(sort),
          onChange: (v) => update({ order: v }) })),
      h(UI.HStack, { justify: "space-between", my: 3, wrap: "wrap" },
        h(UI.Text, { "data-testid": "findings-total" }, d.total ?
          `${num(first)}-${num(last)} of ${num(d.total)} findings` : "No finding matches these filters."),
        h(UI.HStack, { gap: 2 },
          h(UI.Button, { size: "sm", variant: "outline", disabled: d.offset === 0,
            onClick: () => update({ offset: String(Math.max(0, d.offset - d.limit)) }) }, "Previous"),
          h(UI.Button, { size: "sm", variant: "outline", disabled: last >= d.total,
            onClick: () => update({ offset: String(d.offset + d.limit) }) }, "Next"),
          h(UI.Button, { size: "sm", variant: "subtle", asChild: true }, h("a", { href: csv, download: "" }, "Export CSV")))),
      h(DataTable, { rows: d.rows, rowKey: (r) => `${r.issue_type}:${r.id}`, empty: d.total ? "" :
        "Nothing here. Clear a filter, or match part of a repository or rule name.", columns: [
        { title: "Severity", render: (r) => h(SeverityBadge, { severity: r.severity }) },
        { title: "Type", render: (r) => typeLabel(r.issue_type) },
        { title: "Finding", render: (r) => h(OutLink, { href: r.url }, String(r.id)) },
        { title: "Repository", render: (r) => r.repository ?
          h(InLink, { to: viewPath("repository", { name: r.repository }) }, r.repository) : "-" },
        { title: "Branch", key: "branch" },
        { title: "Rule", key: "rule" },
        { title: "Status", render: (r) => words(r.status) },
        { title: "Triage", render: (r) => words(r.triage_state) },
        { title: "Ticket", render: (r) => r.ticket_id == null ? "-" : h(OutLink, { href: r.ticket_url }, `#${r.ticket_id}`) },
        { title: "Detected", key: "detected", nowrap: true },
        { title: "Age (days)", numeric: true, render: (r) => num(r.age_days) },
        { title: "Due", nowrap: true, render: (r) => r.overdue_days ? h(UI.Text, { as: "span", color: "fg.error", fontWeight: "semibold" },
          `${r.due} (${num(r.overdue_days)} d late)`) : (r.due || "-") },
      ] }));
  });
}

// --- other pages --------------------------------------------------------------------------------------------

function Repositories({ params, setParams }) {
  useTitle("Repositories");
  const branches = params.get("branches") || "";
  const state = useApi("api/repositories", { branches });
  return h(Loading, { state }, (d) => h(UI.Box, null, h(BranchView, { view: d.view, params, setParams }), h(DataTable, {
    rows: d.repositories, rowKey: (r) => r.repository, empty: "No open finding.",
    columns: [
      { title: "Repository", render: (r) => h(InLink, { to: viewPath("repository", { name: r.repository, branches }) }, r.repository || "(none)") },
      { title: "Open", numeric: true, render: (r) => h(Count, { value: r.open, query: { measure: "open", repository: r.repository, branches } }) },
      { title: "Past target", numeric: true, render: (r) => h(Count, { value: r.overdue, emphasis: true,
        query: { measure: "overdue", repository: r.repository, branches } }) },
      ...d.severities.map((s) => ({ title: words(s), numeric: true, render: (r) => h(Count, {
        value: r.by_severity[s] || 0, query: { measure: "open", severity: s, repository: r.repository, branches } }) })),
    ],
  })));
}

function Repository({ params, setParams }) {
  const name = params.get("name") || "";
  const branches = params.get("branches") || "";
  useTitle(name);
  const state = useApi("api/repository", { name, branches });
  return h(Loading, { state }, (d) => h(UI.Box, null,
    h(UI.Heading, { size: "lg", mb: 2 }, d.repository),
    h(Muted, null, d.primary_branch ? `Primary branch: ${d.primary_branch}.` :
      "Primary branch not known yet: the findings_extraction DAG lists the projects."),
    h(BranchView, { view: d.view, params, setParams }),
    h(Section, { title: "Findings by severity" }, h(MeasureTable, { measures: d.measures })),
    h(Section, { title: "Open findings per day" }, h(Trend, { trend: d.trend })),
    h(Section, { title: "Newest scans" }, h(ScanTable, { scans: d.scans }))));
}

function ScanTable({ scans }) {
  return h(DataTable, { rows: scans, rowKey: (s) => s.id, empty: "No scan stored yet.", columns: [
    { title: "Scan", render: (s) => h(OutLink, { href: s.link }, String(s.id)) },
    { title: "Repository", render: (s) => s.repository || `repository ${s.repository_id ?? "?"}` },
    { title: "Branch", key: "branch" },
    { title: "Status", render: (s) => h(UI.Badge, { colorPalette: s.failed ? "red" : s.status_label === "Completed" ? "green" : "gray" },
      s.status_label || "-") },
    { title: "Kind", render: (s) => s.full_scan == null ? "-" : s.full_scan ? "Full" : "Diff" },
    { title: "Started", nowrap: true, render: (s) => when(s.started_at) },
    { title: "Duration", numeric: true, render: (s) => duration(s.duration_seconds) },
    { title: "Exit code", numeric: true, key: "exit_code" },
  ] });
}

function Scans({ params, setParams }) {
  useTitle("Scans");
  const status = params.get("status") || "";
  const state = useApi("api/scans", { status });
  return h(UI.Box, null,
    h(UI.HStack, { mb: 2 }, h(Select, { label: "Show", name: "status", value: status,
      options: [["", "All scans"], ["failed", "Failed in the last 7 days"]],
      onChange: (v) => setParams(new URLSearchParams({ view: "scans", ...(v ? { status: v } : {}) })) })),
    h(Loading, { state }, (d) => h(UI.Box, null,
      h(UI.Text, { mb: 2 }, `${num(d.listed)} of ${num(d.total)} scans, newest first.`),
      h(ScanTable, { scans: d.scans }))));
}

function RunsTable({ runs }) {
  return h(DataTable, { rows: runs, rowKey: (r) => `${r.dag_id}/${r.run_id}`, empty: "No run yet.", columns: [
    { title: "DAG", key: "dag_id" },
    { title: "Run", render: (r) => r.dag_id ? h(InLink, { to: `/dags/${encodeURIComponent(r.dag_id)}/runs/${encodeURIComponent(r.run_id)}` }, r.run_id) : r.run_id },
    { title: "State", render: (r) => words(r.state) },
    { title: "Started", nowrap: true, render: (r) => when(r.start_date || r.at) },
    { title: "Outcome", render: (r) => h(UI.Badge, { colorPalette: r.dry_run ? "purple" : r.outcome === "failed" ? "red" :
      r.outcome === "changed nothing" ? "gray" : "green" }, words(r.outcome)) },
    { title: "Triaged", numeric: true, render: (r) => r.dry_run ? `${num(r.triage_planned || 0)} planned` :
      h(Count, { value: r.triaged || 0, query: r.triaged ? { run_id: r.run_id, touched: "triage" } : null }) },
    { title: "Tickets", numeric: true, render: (r) => r.dry_run && r.ticket_findings_planned ?
      `${num(r.ticket_findings_planned)} findings planned` : num(r.tickets_created || 0) },
    { title: "Rules changed", numeric: true, render: (r) => num(r.rules_changed || 0) },
    { title: "Failed", numeric: true, render: (r) => num((r.triage_failed || 0) + (r.ticket_findings_failed || 0) +
      (r.rule_changes_failed || 0)) },
    { title: "", render: (r) => h(InLink, { to: viewPath("run", { run_id: r.run_id, dag_id: r.dag_id || "" }) }, "Details") },
  ] });
}

function Activity({ dagId }) {
  useTitle("Triage and tickets");
  const state = useApi("api/activity", { dag_id: dagId || "" });
  return h(Loading, { state }, (d) => h(UI.Box, null,
    h(Muted, null, "Every run of the DAGs that write to the service, newest first: dry runs and runs that changed " +
      "nothing included."),
    d.airflow ? null : h(Muted, null, "Airflow's runs cannot be read here: only runs that wrote something are listed."),
    h(UI.Box, { mt: 3 }, h(RunsTable, { runs: d.runs }))));
}

function RunView({ runId, dagId }) {
  useTitle(`Run ${runId}`);
  const state = useApi("api/run", { run_id: runId, dag_id: dagId || "" });
  return h(Loading, { state }, (d) => d.sections.length === 0 ? h(UI.Box, null,
    h(Muted, null, `${d.dag_id} does not triage, ticket or change rules: what it stored is on the dashboard's pages.`),
    h(InLink, { to: NAV_PATH }, "Open the findings dashboard")) : h(UI.Box, null,
    d.dry_run ? h(UI.Alert.Root, { status: "warning", mb: 3 }, h(UI.Alert.Indicator, null),
      h(UI.Alert.Content, null, h(UI.Alert.Title, null, "Dry run"),
        h(UI.Alert.Description, null, "Nothing was sent to the service. Below is what this run would have done."))) : null,
    h(UI.HStack, { gap: 4, wrap: "wrap" },
      d.sections.includes("triage") ? h(InLink, { to: findingsPath(d.triaged_query) },
        d.dry_run ? "Findings it would have triaged" : "Findings it triaged") : null,
      d.sections.includes("tickets") ? h(InLink, { to: findingsPath(d.ticketed_query) },
        d.dry_run ? "Findings it would have ticketed" : "Findings it ticketed") : null),
    !d.sections.includes("triage") ? null : h(Section, { title: "Triage requests" }, h(DataTable, { rows: d.triage, empty: "This run sent no triage request.", columns: [
      { title: "Type", key: "issue_type" },
      { title: "Status", render: (r) => words(r.status) },
      { title: "Findings", numeric: true, render: (r) => num(r.num_triaged) },
      { title: "Error", key: "error" },
      { title: "At", render: (r) => when(r.created_at) },
    ] })),
    !d.sections.includes("tickets") ? null : h(Section, { title: "Tickets" }, h(DataTable, { rows: d.tickets, empty: "This run created no ticket.", columns: [
      { title: "Ticket", render: (r) => r.ticket_id == null ? "-" : h(OutLink, { href: r.ticket_url }, r.external_slug || `#${r.ticket_id}`) },
      { title: "Outcome", render: (r) => words(r.outcome) },
      { title: "Findings", numeric: true, render: (r) => num(r.findings) },
    ] })),
    !d.sections.includes("rules") ? null : h(Section, { title: "Rule mode changes" },
      h(PolicyTable, { rows: d.policy_changes }))));
}

function PolicyTable({ rows }) {
  return h(DataTable, { rows, empty: "No rule mode change.", columns: [
    { title: "At", render: (r) => when(r.created_at) },
    { title: "Policy", key: "policy_id" },
    { title: "Rule", key: "rule_path" },
    { title: "From", render: (r) => words(r.previous_mode) },
    { title: "To", render: (r) => words(r.new_mode) },
    { title: "Status", render: (r) => words(r.status) },
    { title: "Run", key: "run_id" },
  ] });
}

function ReportLine({ report, what }) {
  if (!report) return h(Muted, null, `No ${what} report yet.`);
  return h(UI.Text, null, `Latest ${what} report: `,
    h(InLink, { to: viewPath("reports", { name: report.name, run_id: report.run_id || "" }) }, report.title),
    ` (${when(report.created_at)})`);
}

function Policies() {
  useTitle("Policies");
  const state = useApi("api/policies");
  return h(Loading, { state }, (d) => h(UI.Box, null,
    d.retired ? h(UI.Alert.Root, { status: "warning", mb: 3 }, h(UI.Alert.Indicator, null),
      h(UI.Alert.Content, null,
        h(UI.Alert.Title, null, `The service retired its policy API for this deployment on ${when(d.retired.seen_at)}`),
        h(UI.Alert.Description, null, d.retired.message))) : null,
    h(ReportLine, { report: d.report, what: "policy tuning" }),
    h(Muted, null, "Proposals apply only after a person approves them in the policy_tuning run."),
    h(Section, { title: "Rule mode changes sent" }, h(PolicyTable, { rows: d.changes }))));
}

function Inventory() {
  useTitle("Inventory");
  const state = useApi("api/inventory");
  return h(Loading, { state }, (d) => h(UI.Box, null,
    h(UI.Flex, { gap: 3, wrap: "wrap" },
      h(Stat, { label: "Dependencies", value: d.dependencies }),
      h(Stat, { label: "Packages", value: d.packages }),
      h(Stat, { label: "Repositories", value: d.repositories })),
    h(UI.Box, { mt: 3 }, h(ReportLine, { report: d.report, what: "inventory" })),
    h(Section, { title: "By ecosystem" }, h(DataTable, { rows: d.ecosystems, empty: "No dependency stored yet.", columns: [
      { title: "Ecosystem", key: "ecosystem" },
      { title: "Dependencies", numeric: true, render: (r) => num(r.dependencies) },
    ] }))));
}

function Reports({ params }) {
  useTitle("Reports");
  const name = params.get("name") || "";
  const runId = params.get("run_id") || "";
  const state = useApi("api/reports");
  return h(Loading, { state }, (d) => {
    const shown = name || (d.reports[0] && d.reports[0].name);
    return h(UI.Box, null,
      h(DataTable, { rows: d.reports.slice(0, 20), empty: "No report yet: the DAGs write them.", columns: [
        { title: "Report", render: (r) => h(InLink, { to: viewPath("reports", { name: r.name, run_id: r.run_id || "" }) }, r.title) },
        { title: "Run", key: "run_id" },
        { title: "Written", render: (r) => when(r.created_at) },
      ] }),
      shown ? h(UI.Box, { as: "iframe", title: "report", mt: 4, width: "100%", height: "80vh", borderWidth: "1px",
        borderColor: "border", borderRadius: "md",
        src: apiUrl(`reports/${encodeURIComponent(shown)}`, { run_id: runId,
          theme: document.documentElement.classList.contains("dark") ? "dark" : "" }) }) : null);
  });
}

// --- the app and its destinations ---------------------------------------------------------------------------

const VIEWS = {
  "": Overview, findings: Findings, repositories: Repositories, repository: Repository, scans: Scans,
  activity: () => h(Activity, {}), policies: Policies, inventory: Inventory, reports: Reports,
  run: ({ params }) => h(RunView, { runId: params.get("run_id") || "", dagId: params.get("dag_id") || "" }),
};

function Shell({ children, current }) {
  return h(UI.Box, { p: 4, "data-testid": "findings-dashboard" },
    h(UI.Heading, { as: "h2", size: "xl", mb: 3 }, "Findings"),
    h(UI.HStack, { as: "nav", gap: 1, wrap: "wrap", borderBottomWidth: "1px", borderColor: "border", mb: 4 },
      PAGES.map(([view, title]) => h(UI.Button, { key: view, asChild: true, size: "sm", variant: "ghost",
          borderRadius: 0, borderWidth: 0, borderBottomWidth: "2px", borderColor: view === current ? "fg.info" : "transparent",
          color: view === current ? "fg" : "fg.muted", "aria-current": view === current ? "page" : undefined },
        h(Router.Link, { to: viewPath(view, {}) }, title)))),
    children);
}

function FindingsApp() {
  const [params, setParams] = Router.useSearchParams();
  const view = params.get("view") || "";
  const View = VIEWS[view];
  const current = view === "repository" ? "repositories" : view === "run" ? "activity" : view;
  return h(Shell, { current }, View ? h(View, { params, setParams }) :
    h(Muted, null, `No page named "${view}".`));
}

//: The dashboard page that shows what a pipeline DAG that does not write to the service keeps up to date.
const DAG_PAGES = { scan_monitoring: Scans, findings_extraction: Overview, dependency_inventory: Inventory };

function DagFindings({ dagId }) {
  const state = useApi("api/activity", { dag_id: dagId || "" });
  const [params, setParams] = Router.useSearchParams();
  return h(UI.Box, { p: 2, "data-testid": "findings-dag" }, h(Loading, { state }, (d) => {
    if (!d.dag.pipeline) return h(Muted, null, `${dagId} is not one of the findings pipeline's DAGs.`);
    if (!d.dag.writes) {
      const Page = DAG_PAGES[dagId];
      return h(UI.Box, null,
        h(Muted, null, `${dagId} does not write to the service: below is what it keeps up to date. `,
          h(InLink, { to: NAV_PATH }, "Open the findings dashboard")),
        Page ? h(UI.Box, { mt: 3 }, h(Page, { params, setParams })) : null);
    }
    return h(UI.Box, null,
      h(Muted, null, `Runs of ${dagId}, newest first: what each changed in the service, dry runs and runs that ` +
        "changed nothing included."),
      h(UI.Box, { mt: 2 }, h(RunsTable, { runs: d.runs })));
  }));
}

function RunFindings({ dagId, runId }) {
  return h(UI.Box, { p: 2 }, h(RunView, { runId, dagId }));
}

function Widget() {
  const state = useApi("api/widget");
  return h(UI.Box, { borderWidth: "1px", borderColor: "border", borderRadius: "md", p: 3, mb: 2 },
    h(UI.Heading, { size: "md", mb: 2 }, h(InLink, { to: NAV_PATH }, "Findings")),
    h(Loading, { state }, (d) => h(UI.Flex, { gap: 3, wrap: "wrap" },
      h(Stat, { label: "Open critical", value: d.open_critical.count, query: d.open_critical.query, emphasis: true }),
      h(Stat, { label: "Past fix-time target", value: d.overdue.count, query: d.overdue.query, emphasis: true }),
      h(Stat, { label: "Failed scans", value: d.failed_scans.count, to: viewPath("scans", { status: "failed" }),
        emphasis: true, help: `last ${d.failed_scans.days} days` }),
      h(Stat, { label: "Approvals waiting", value: d.approvals, to: NAV_PATH + "#approvals", emphasis: true }))));
}

globalThis[APP_NAMES.nav] = FindingsApp;
globalThis[APP_NAMES.dag] = DagFindings;
globalThis[APP_NAMES.dag_run] = RunFindings;
globalThis[APP_NAMES.dashboard] = Widget;
globalThis.AirflowPlugin = FindingsApp;
export default FindingsApp;
