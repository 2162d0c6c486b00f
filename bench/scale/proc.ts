// Reads a process's memory and CPU time from /proc (Linux): what the kernel charges it, no cooperation needed.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second, the unit of utime/stime in /proc/<pid>/stat. */
export const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** Resident set size in KiB (VmRSS of /proc/<pid>/status). */
export function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

/** /proc/<pid>/smaps_rollup as field -> KiB (Rss, Pss, Anonymous, ...). */
export function smapsRollupKiB(pid: number): Record<string, number> {
  const fields: Record<string, number> = {};
  for (const m of readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").matchAll(/^(\w+):\s+(\d+) kB$/gm)) {
    fields[m[1]!] = Number(m[2]);
  }
  return fields;
}

/** User + system CPU time consumed so far, in seconds. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name, which is in parentheses and may contain spaces.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(rest[11]); // field 14 of stat
  const stime = Number(rest[12]); // field 15
  return (utime + stime) / CLK_TCK;
}

/** The machine's CPU time in seconds from /proc/stat: busy (all but idle and iowait) and in all. */
export function machineCpuSeconds(): { busy: number; total: number } {
  const fields = readFileSync("/proc/stat", "utf8")
    .split("\n", 1)[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: (total - idle) / CLK_TCK, total: total / CLK_TCK };
}

/** Open file descriptors of a process. */
export function openFds(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** CPU seconds (user, system) per thread, keyed "<comm> <tid>" — shows work off the JS thread (GC, libuv). */
export function threadCpuSeconds(pid: number): Map<string, { user: number; system: number }> {
  const out = new Map<string, { user: number; system: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    } catch {
      continue; // the thread ended meanwhile
    }
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    out.set(`${comm} ${tid}`, { user: Number(rest[11]) / CLK_TCK, system: Number(rest[12]) / CLK_TCK });
  }
  return out;
}
