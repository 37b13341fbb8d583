/**
 * C's strftime in the "C" locale and local time, as llama.cpp's Jinja `strftime_now` gives
 * it to templates (Llama 3.2 writes `strftime_now("%d %b %Y")` into its system prompt).
 * @huggingface/jinja's own follows the host's locale and knows eight conversions; a prompt
 * must not change with the machine's language.
 */

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

const pad = (n: number, width = 2, fill = "0"): string => String(n).padStart(width, fill);

function dayOfYear(d: Date): number {
  const start = new Date(d.getFullYear(), 0, 1);
  const utc = (x: Date): number => Date.UTC(x.getFullYear(), x.getMonth(), x.getDate());
  return (utc(d) - utc(start)) / 86_400_000 + 1;
}

/** Week of the year, weeks starting on `firstDay` (0 Sunday, 1 Monday), as %U and %W. */
function weekOfYear(d: Date, firstDay: number): number {
  const yday = dayOfYear(d) - 1;
  const wday = (d.getDay() - firstDay + 7) % 7;
  return Math.floor((yday + 7 - wday) / 7);
}

function offset(d: Date): string {
  const minutes = -d.getTimezoneOffset();
  const sign = minutes < 0 ? "-" : "+";
  return sign + pad(Math.floor(Math.abs(minutes) / 60)) + pad(Math.abs(minutes) % 60);
}

function conversion(d: Date, c: string): string | undefined {
  const hour12 = d.getHours() % 12 === 0 ? 12 : d.getHours() % 12;
  switch (c) {
    case "a":
      return DAYS[d.getDay()].slice(0, 3);
    case "A":
      return DAYS[d.getDay()];
    case "b":
    case "h":
      return MONTHS[d.getMonth()].slice(0, 3);
    case "B":
      return MONTHS[d.getMonth()];
    case "c":
      return strftime(d, "%a %b %e %H:%M:%S %Y");
    case "C":
      return pad(Math.floor(d.getFullYear() / 100));
    case "d":
      return pad(d.getDate());
    case "D":
    case "x":
      return strftime(d, "%m/%d/%y");
    case "e":
      return pad(d.getDate(), 2, " ");
    case "F":
      return strftime(d, "%Y-%m-%d");
    case "H":
      return pad(d.getHours());
    case "I":
      return pad(hour12);
    case "j":
      return pad(dayOfYear(d), 3);
    case "k":
      return pad(d.getHours(), 2, " ");
    case "l":
      return pad(hour12, 2, " ");
    case "m":
      return pad(d.getMonth() + 1);
    case "M":
      return pad(d.getMinutes());
    case "n":
      return "\n";
    case "p":
      return d.getHours() < 12 ? "AM" : "PM";
    case "P":
      return d.getHours() < 12 ? "am" : "pm";
    case "r":
      return strftime(d, "%I:%M:%S %p");
    case "R":
      return strftime(d, "%H:%M");
    case "s":
      return String(Math.floor(d.getTime() / 1000));
    case "S":
      return pad(d.getSeconds());
    case "t":
      return "\t";
    case "T":
    case "X":
      return strftime(d, "%H:%M:%S");
    case "u":
      return String(d.getDay() === 0 ? 7 : d.getDay());
    case "U":
      return pad(weekOfYear(d, 0));
    case "w":
      return String(d.getDay());
    case "W":
      return pad(weekOfYear(d, 1));
    case "y":
      return pad(d.getFullYear() % 100);
    case "Y":
      return String(d.getFullYear());
    case "z":
      return offset(d);
    case "%":
      return "%";
    default:
      return undefined;
  }
}

/** `format` with its conversions replaced; an unknown conversion is kept as written. */
export function strftime(date: Date, format: string): string {
  return format.replace(/%(.)/gs, (whole, c: string) => conversion(date, c) ?? whole);
}
