//! The numastat table: how Debian's numastat (numactl 2.0.16, `numastat.c`) lays out its tables, so
//! our output is the same byte for byte. Written from its documented behaviour and observed output, not
//! copied.
//!
//! ```text
//!   header rows ->                    Node 0          Node 1           Total     <- right-justified, width 16
//!                            --------------- --------------- ---------------     <- '-' x (width - 1)
//!   data rows   -> Huge                 0.00            0.00            0.00
//!                  ^ left column, left-justified, width 16 (process tables: 16..24 fitted to labels)
//! ```
//!
//! Rules kept from numastat:
//! - A cell is printed into exactly its column's width; text longer than the width is cut.
//! - `-c` fits each column to its widest cell plus one blank (between 4 and 16; labels up to 16).
//! - Columns and rows with no data are left out; with `-z` also those whose data are all zero. The
//!   marks "has data" / "has non-zero data" are never cleared, so a table reused for several
//!   processes (`-p A -p B -v`) keeps showing a row once any process had it non-zero.
//! - Lines are folded at the screen width: the header column is repeated and the data columns that did
//!   not fit follow in a new block after an empty line.
//! - Sorting (`-s`) is a selection sort by descending value over a row index map; ties keep the order
//!   that sort leaves, which depends on the previous order (it is not stable).

/// Content of one cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Never assigned: prints as nothing, does not count as data.
    Null,
    /// A number printed with the column's decimal places.
    Num(f64),
    /// Text.
    Text(String),
    /// A rule: the character repeated to one less than the column width.
    Rule(char),
}

/// Column justification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Justify {
    /// Pad on the right.
    Left,
    /// Pad on the left.
    Right,
}

const SEEN: u8 = 1;
const NON_ZERO: u8 = 2;
const ALWAYS: u8 = 4;

/// A table with `header_rows` header rows and one header column.
#[derive(Debug, Clone)]
pub struct Table {
    header_rows: usize,
    rows: usize,
    cols: usize,
    cells: Vec<Cell>,
    row_map: Vec<usize>,
    row_flags: Vec<u8>,
    col_flags: Vec<u8>,
    width: Vec<usize>,
    decimals: Vec<usize>,
    justify: Vec<Justify>,
}

/// The header column count: numastat always has exactly one.
const HEADER_COLS: usize = 1;

impl Table {
    /// A table of `header_rows + data_rows` rows and `1 + data_cols` columns, all cells empty.
    pub fn new(header_rows: usize, data_rows: usize, data_cols: usize) -> Self {
        let rows = header_rows + data_rows;
        let cols = HEADER_COLS + data_cols;
        Table {
            header_rows,
            rows,
            cols,
            cells: vec![Cell::Null; rows * cols],
            row_map: (0..rows).collect(),
            row_flags: vec![0; rows],
            col_flags: vec![0; cols],
            width: vec![0; cols],
            decimals: vec![0; cols],
            justify: vec![Justify::Left; cols],
        }
    }

    fn ix(&self, row: usize, col: usize) -> usize {
        row * self.cols + col
    }

    /// Sets a cell.
    pub fn set(&mut self, row: usize, col: usize, cell: Cell) {
        let i = self.ix(row, col);
        self.cells[i] = cell;
    }

    /// Adds to a numeric cell (an empty cell counts as 0).
    pub fn add(&mut self, row: usize, col: usize, v: f64) {
        let i = self.ix(row, col);
        let cur = match self.cells[i] {
            Cell::Num(x) => x,
            _ => 0.0,
        };
        self.cells[i] = Cell::Num(cur + v);
    }

    /// Sets every data cell to the number 0.
    pub fn zero_data(&mut self) {
        for r in self.header_rows..self.rows {
            for c in HEADER_COLS..self.cols {
                let i = self.ix(r, c);
                self.cells[i] = Cell::Num(0.0);
            }
        }
    }

    /// Column width, decimals and justification.
    pub fn set_col(&mut self, col: usize, width: usize, decimals: usize, justify: Justify) {
        self.width[col] = width.min(127);
        self.decimals[col] = decimals;
        self.justify[col] = justify;
    }

    /// Marks a row to be shown even without data (the rule above the Total row).
    pub fn always_show_row(&mut self, row: usize) {
        self.row_flags[row] |= ALWAYS;
    }

    /// The text of a cell as numastat formats it for a column `max_width` wide.
    fn text(&self, cell: &Cell, max_width: usize, decimals: usize) -> String {
        let s = match cell {
            Cell::Null => String::new(),
            Cell::Num(v) => format!("{v:.decimals$}"),
            Cell::Text(t) => t.clone(),
            Cell::Rule(c) => c.to_string().repeat(max_width.saturating_sub(1)),
        };
        cut(s, max_width)
    }

    /// `-c`: fits a column to its widest cell plus one blank, within `min..=max`.
    pub fn fit_col(&mut self, col: usize, min: usize, max: usize) {
        let mut w = min;
        for r in 0..self.rows {
            let cell = &self.cells[self.ix(r, col)];
            if matches!(cell, Cell::Rule(_)) {
                continue;
            }
            w = w.max(self.text(cell, max, self.decimals[col]).len());
        }
        self.width[col] = (w + 1).min(max);
    }

    /// Sorts the data rows `first..=last` by descending value in `col` (numastat's selection sort).
    pub fn sort_desc(&mut self, first: usize, last: usize, col: usize) {
        let val = |t: &Table, r: usize| match t.cells[t.ix(t.row_map[r], col)] {
            Cell::Num(v) => v,
            _ => 0.0,
        };
        for i in first..=last {
            let mut best = i;
            for j in i + 1..=last {
                if val(self, best) < val(self, j) {
                    best = j;
                }
            }
            self.row_map.swap(i, best);
        }
    }

    /// Renders the table at `screen_width`; `show_zero` false is `-z`.
    pub fn render(&mut self, screen_width: usize, show_zero: bool) -> String {
        let mut any_seen = false;
        let mut any_non_zero = false;
        for r in self.header_rows..self.rows {
            for c in HEADER_COLS..self.cols {
                let cell = &self.cells[self.ix(r, c)];
                if matches!(cell, Cell::Null | Cell::Rule(_)) {
                    continue;
                }
                any_seen = true;
                self.row_flags[r] |= SEEN;
                self.col_flags[c] |= SEEN;
                // numastat tests the raw bits: anything but +0.0 or an empty text... a text cell is
                // always "non-zero" (its pointer is).
                let non_zero = match cell {
                    Cell::Num(v) => v.to_bits() != 0,
                    _ => true,
                };
                if non_zero {
                    any_non_zero = true;
                    self.row_flags[r] |= NON_ZERO;
                    self.col_flags[c] |= NON_ZERO;
                }
            }
        }
        if !any_seen {
            return "Table has no data.\n".to_string();
        }
        if !any_non_zero && !show_zero {
            return "Table has no non-zero data.\n".to_string();
        }
        let col_shown = |t: &Table, c: usize| {
            t.col_flags[c] & ALWAYS != 0
                || (t.col_flags[c] & SEEN != 0 && (show_zero || t.col_flags[c] & NON_ZERO != 0))
        };
        let mut out = String::new();
        let mut printed_block = false;
        let mut data_col = HEADER_COLS;
        while data_col < self.cols {
            if !col_shown(self, data_col) {
                data_col += 1;
                continue;
            }
            if printed_block {
                out.push('\n');
            }
            let mut next_col = data_col;
            for ri in 0..self.rows {
                let r = self.row_map[ri];
                if r >= self.header_rows && self.row_flags[r] & ALWAYS == 0 {
                    let seen = self.row_flags[r] & SEEN != 0;
                    let non_zero = self.row_flags[r] & NON_ZERO != 0;
                    if !seen || (!show_zero && !non_zero) {
                        continue;
                    }
                }
                let mut line_width = 0;
                for c in 0..HEADER_COLS {
                    self.put(&mut out, r, c);
                    line_width += self.width[c];
                }
                let mut c = data_col;
                loop {
                    if col_shown(self, c) {
                        self.put(&mut out, r, c);
                        line_width += self.width[c];
                    }
                    c += 1;
                    if c >= self.cols || line_width + self.width[c] > screen_width {
                        break;
                    }
                }
                out.push('\n');
                next_col = c;
            }
            printed_block = true;
            data_col = next_col;
        }
        out
    }

    fn put(&self, out: &mut String, r: usize, c: usize) {
        let w = self.width[c];
        let s = self.text(&self.cells[self.ix(r, c)], w, self.decimals[c]);
        let pad = w.saturating_sub(s.len());
        match self.justify[c] {
            Justify::Left => {
                out.push_str(&s);
                out.extend(std::iter::repeat_n(' ', pad));
            }
            Justify::Right => {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(&s);
            }
        }
    }
}

/// Cuts `s` to at most `max` bytes, at a character boundary.
fn cut(mut s: String, max: usize) -> String {
    let end = numapilot_observe::error::char_prefix(&s, max).len();
    s.truncate(end);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_by_two() -> Table {
        let mut t = Table::new(2, 2, 2);
        t.set_col(0, 16, 0, Justify::Left);
        for c in 1..3 {
            t.set_col(c, 16, 2, Justify::Right);
            t.set(1, c, Cell::Rule('-'));
        }
        t.set(0, 1, Cell::Text("Node 0".into()));
        t.set(0, 2, Cell::Text("Total".into()));
        t.set(2, 0, Cell::Text("A".into()));
        t.set(3, 0, Cell::Text("B".into()));
        t.set(2, 1, Cell::Num(1.5));
        t.set(2, 2, Cell::Num(1.5));
        t.set(3, 1, Cell::Num(0.0));
        t.set(3, 2, Cell::Num(0.0));
        t
    }

    #[test]
    fn layout_matches_numastat() {
        let out = two_by_two().render(10_000_000, true);
        // 16-wide left label column, then 16-wide right-justified columns; rules are 15 dashes.
        let want = format!(
            "{:16}{:>16}{:>16}\n{:16}{:>16}{:>16}\n{:16}{:>16}{:>16}\n{:16}{:>16}{:>16}\n",
            "",
            "Node 0",
            "Total",
            "",
            "-".repeat(15),
            "-".repeat(15),
            "A",
            "1.50",
            "1.50",
            "B",
            "0.00",
            "0.00"
        );
        assert_eq!(out, want);
    }

    #[test]
    fn zero_rows_are_skipped_with_z() {
        let out = two_by_two().render(10_000_000, false);
        assert!(!out.contains("\nB "), "{out}");
        assert!(out.contains("\nA "), "{out}");
    }

    #[test]
    fn folding_repeats_the_header_column() {
        let out = two_by_two().render(40, true);
        let blocks: Vec<&str> = out.split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "{out}");
        assert!(blocks[0].starts_with("                          Node 0\n"));
        assert!(blocks[1].starts_with("                           Total\n"));
    }

    #[test]
    fn compress_fits_columns() {
        let mut t = two_by_two();
        for c in 0..3 {
            t.fit_col(c, 4, 16);
        }
        let out = t.render(10_000_000, true);
        // Label column: min 4 + 1; "Node 0" column: 6 + 1; "Total": 5 + 1.
        assert!(out.starts_with("      Node 0 Total\n      ------ -----\nA       1.50  1.50\n"), "{out:?}");
    }

    #[test]
    fn sort_is_descending() {
        let mut t = two_by_two();
        t.set(3, 1, Cell::Num(9.0));
        t.set(3, 2, Cell::Num(9.0));
        t.sort_desc(2, 3, 2);
        let out = t.render(10_000_000, true);
        let b = out.find("\nB").unwrap();
        let a = out.find("\nA").unwrap();
        assert!(b < a, "{out}");
    }

    #[test]
    fn long_text_is_cut_to_the_column() {
        assert_eq!(cut("abcdef".into(), 4), "abcd");
        assert_eq!(cut("ééé".into(), 3), "é");
    }

    #[test]
    fn empty_tables_say_so() {
        let mut t = Table::new(1, 1, 1);
        assert_eq!(t.render(80, true), "Table has no data.\n");
        let mut t = Table::new(1, 1, 1);
        t.set(1, 1, Cell::Num(0.0));
        assert_eq!(t.render(80, false), "Table has no non-zero data.\n");
    }
}
