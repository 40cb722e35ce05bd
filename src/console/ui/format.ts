export const DASH = '—';

export function count(n: number | null | undefined): string {
  return n === null || n === undefined ? DASH : n.toLocaleString('en-US');
}

/** 42 s, 7 min, 3 h 5 min, 2 d 4 h. */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return DASH;
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) {
    const m = Math.floor((s % 3600) / 60);
    return `${Math.floor(s / 3600)} h${m ? ` ${m} min` : ''}`;
  }
  const h = Math.floor((s % 86400) / 3600);
  return `${Math.floor(s / 86400)} d${h ? ` ${h} h` : ''}`;
}

/** An instant as local date and time, to the second; "—" when absent or unreadable. */
export function when(iso: string | null | undefined): string {
  if (!iso) return DASH;
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return iso;
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}`;
}

/** "in 42 min" or "3 min ago" from now. */
export function relative(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return DASH;
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return DASH;
  const s = (t - now) / 1000;
  return s >= 0 ? `in ${duration(s)}` : `${duration(-s)} ago`;
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
