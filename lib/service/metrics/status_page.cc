#include "lib/service/metrics/status_page.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

namespace tfdata::service {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Rate(double per_second) {
  if (per_second >= 1e6) return absl::StrFormat("%.2fM", per_second / 1e6);
  if (per_second >= 1e3) return absl::StrFormat("%.1fk", per_second / 1e3);
  return absl::StrFormat("%.1f", per_second);
}

std::string Heartbeat(double seconds) { return seconds < 0 ? "none yet" : absl::StrFormat("%.1f s ago", seconds); }

std::string Stall(const JobStatus& j) {
  return j.has_stall_fraction() ? absl::StrFormat("%.0f%%", 100 * j.stall_fraction()) : "-";
}

std::string Progress(const JobStatus& j) {
  if (j.mode() != "distributed_epoch") return "-";
  std::string s = absl::StrCat("epoch ", j.epoch(), ": ", j.splits_handed_out(), " / ",
                               j.splits_per_epoch() > 0 ? absl::StrCat(j.splits_per_epoch()) : "?", " splits");
  if (j.splits_lost() > 0) absl::StrAppend(&s, ", ", j.splits_lost(), " lost");
  return s;
}

std::string JobName(const JobStatus& j) { return j.name().empty() ? "-" : j.name(); }

std::string Mode(const JobStatus& j) {
  std::string m = j.mode();
  if (j.exactly_once()) m += ", exactly once";
  if (j.cross_trainer_cache()) m += ", cross-trainer cache";
  if (j.num_consumers() > 0) absl::StrAppend(&m, ", ", j.num_consumers(), " consumers");
  return m;
}

std::string Uptime(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) return absl::StrFormat("%dh %02dm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm %02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

// One HTML table: a header row and rows of cells (already escaped), each row with its attributes.
void HtmlTable(std::string* out, const std::string& id, const std::vector<std::string>& header,
               const std::vector<std::pair<std::string, std::vector<std::string>>>& rows, const std::string& empty) {
  absl::StrAppend(out, "<table id=\"", id, "\"><thead><tr>");
  for (const std::string& h : header) absl::StrAppend(out, "<th>", h, "</th>");
  absl::StrAppend(out, "</tr></thead><tbody>");
  if (rows.empty()) {
    absl::StrAppend(out, "<tr class=\"empty\"><td colspan=\"", header.size(), "\">", empty, "</td></tr>");
  }
  for (const auto& [attributes, cells] : rows) {
    absl::StrAppend(out, "<tr ", attributes, ">");
    for (const std::string& c : cells) absl::StrAppend(out, "<td>", c, "</td>");
    absl::StrAppend(out, "</tr>");
  }
  absl::StrAppend(out, "</tbody></table>");
}

// One text table: columns padded to their widest cell.
void TextTable(std::string* out, const std::string& title, const std::vector<std::string>& header,
               const std::vector<std::vector<std::string>>& rows) {
  absl::StrAppend(out, title, "\n");
  if (rows.empty()) {
    absl::StrAppend(out, "  (none)\n\n");
    return;
  }
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l = " ";
    for (size_t i = 0; i < cells.size(); ++i) {
      absl::StrAppend(&l, " ", cells[i], std::string(width[i] - cells[i].size(), ' '));
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    absl::StrAppend(out, l, "\n");
  };
  line(header);
  for (const auto& row : rows) line(row);
  absl::StrAppend(out, "\n");
}

const std::vector<std::string> kWorkerHeader = {"address", "tags",      "tasks", "elements/s",
                                                "bytes/s", "heartbeat", "state"};
const std::vector<std::string> kDatasetHeader = {"id", "pipeline", "compression", "jobs"};
const std::vector<std::string> kJobHeader = {"job",      "name",    "dataset",    "mode",  "iteration",
                                             "readers",  "workers", "elements/s", "stall", "recommended workers",
                                             "progress", "finished"};

std::vector<std::string> WorkerCells(const WorkerStatus& w) {
  return {w.address(),
          absl::StrJoin(w.tags(), ","),
          absl::StrCat(w.tasks()),
          Rate(w.elements_per_second()),
          HumanBytes(w.bytes_per_second()) + "/s",
          Heartbeat(w.seconds_since_heartbeat()),
          w.state()};
}

std::vector<std::string> DatasetCells(const DatasetStatus& d) {
  return {d.id(), d.ops(), d.compression(), absl::StrCat(d.jobs())};
}

std::vector<std::string> JobCells(const JobStatus& j) {
  return {absl::StrCat(j.id()),
          JobName(j),
          j.dataset_id(),
          Mode(j),
          absl::StrCat(j.iteration_id(), " (repetition ", j.repetition(), ")"),
          absl::StrCat(j.readers()),
          absl::StrCat(j.workers()),
          Rate(j.elements_per_second()),
          Stall(j),
          absl::StrCat(j.workers_recommended()),
          Progress(j),
          j.finished() ? "yes" : "no"};
}

std::vector<std::string> Escaped(std::vector<std::string> cells) {
  for (std::string& c : cells) c = Escape(c);
  return cells;
}

std::string JournalLine(const JournalStatus& j) {
  if (!j.enabled()) return "off (not --fault-tolerant: a restart forgets every job)";
  return absl::StrCat(j.path(), ": ", HumanBytes(static_cast<double>(j.bytes())), ", ", j.appends_total(),
                      " records appended since start (", HumanBytes(static_cast<double>(j.appended_bytes_total())),
                      "), mean append+sync ", absl::StrFormat("%.2f ms", 1000 * j.mean_append_seconds()));
}

}  // namespace

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f %s", bytes, units[u]) : absl::StrFormat("%.1f %s", bytes, units[u]);
}

std::string StatusHtml(const DispatcherStatus& status, int refresh_seconds) {
  std::string out = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"",
      refresh_seconds,
      "\"><title>tfdata dispatcher</title><style>"
      "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}"
      "h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.5em}"
      "table{border-collapse:collapse;font-size:.9em}"
      "th,td{border-bottom:1px solid #ddd;padding:.3em .8em;text-align:left}"
      "th{background:#f4f4f4}td{font-variant-numeric:tabular-nums}"
      ".suspected,.unheard{color:#b00}.stalled{color:#b00;font-weight:bold}.meta{color:#666}"
      "</style></head><body>\n<h1>tfdata dispatcher</h1>\n<p class=\"meta\">up ",
      Uptime(status.uptime_seconds()), " &middot; incarnation ", absl::StrFormat("%016x", status.incarnation_id()),
      " &middot; ", status.fault_tolerant() ? "fault-tolerant" : "not fault-tolerant", " &middot; refreshes every ",
      refresh_seconds,
      " s &middot; <a href=\"status.json\">status.json</a> &middot; <a href=\"metrics\">metrics</a></p>\n");

  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  for (const WorkerStatus& w : status.workers()) {
    rows.emplace_back(
        absl::StrCat("class=\"worker ", Escape(w.state()), "\" data-address=\"", Escape(w.address()), "\""),
        Escaped(WorkerCells(w)));
  }
  absl::StrAppend(&out, "<h2>Workers (", status.workers_size(), ")</h2>\n");
  HtmlTable(&out, "workers", kWorkerHeader, rows, "no worker has registered");

  rows.clear();
  for (const DatasetStatus& d : status.datasets()) {
    rows.emplace_back(absl::StrCat("class=\"dataset\" data-dataset=\"", Escape(d.id()), "\""),
                      Escaped(DatasetCells(d)));
  }
  absl::StrAppend(&out, "\n<h2>Datasets (", status.datasets_size(), ")</h2>\n");
  HtmlTable(&out, "datasets", kDatasetHeader, rows, "no dataset is registered");

  rows.clear();
  for (const JobStatus& j : status.jobs()) {
    const bool stalled = j.has_stall_fraction() && j.workers_recommended() > j.workers();
    rows.emplace_back(absl::StrCat("class=\"job", stalled ? " stalled" : "", "\" data-job=\"", j.id(), "\""),
                      Escaped(JobCells(j)));
  }
  absl::StrAppend(&out, "\n<h2>Jobs (", status.jobs_size(), ")</h2>\n");
  HtmlTable(&out, "jobs", kJobHeader, rows, "no job is being read");

  absl::StrAppend(&out, "\n<h2>Journal</h2>\n<p id=\"journal\">", Escape(JournalLine(status.journal())),
                  "</p>\n</body></html>\n");
  return out;
}

std::string StatusJson(const DispatcherStatus& status) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(status, &out, options).ok()) return "{}";
  return out + "\n";
}

std::string StatusText(const DispatcherStatus& status) {
  std::string out = absl::StrCat("dispatcher: up ", Uptime(status.uptime_seconds()), ", ",
                                 status.fault_tolerant() ? "fault-tolerant" : "not fault-tolerant", "\n\n");
  std::vector<std::vector<std::string>> rows;
  for (const WorkerStatus& w : status.workers()) rows.push_back(WorkerCells(w));
  TextTable(&out, absl::StrCat("WORKERS (", status.workers_size(), ")"), kWorkerHeader, rows);
  rows.clear();
  for (const DatasetStatus& d : status.datasets()) rows.push_back(DatasetCells(d));
  TextTable(&out, absl::StrCat("DATASETS (", status.datasets_size(), ")"), kDatasetHeader, rows);
  rows.clear();
  for (const JobStatus& j : status.jobs()) rows.push_back(JobCells(j));
  TextTable(&out, absl::StrCat("JOBS (", status.jobs_size(), ")"), kJobHeader, rows);
  absl::StrAppend(&out, "JOURNAL\n  ", JournalLine(status.journal()), "\n");
  return out;
}

}  // namespace tfdata::service
