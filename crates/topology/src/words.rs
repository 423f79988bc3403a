//! Words for messages shared by every crate that prints counts: the cli, the daemon and the
//! policy (which the cli depends on, so the helper lives here, at the bottom).

/// A count and its noun for a message: "1 CPU", "2 CPUs", "0 processes", "1.5 CPUs". The noun
/// takes the plural unless the count reads exactly `1` (a float that prints `1`, too); the plural
/// adds "es" after s, x, z, ch or sh, else "s". A count that is padded (`{:>6}`) is read without
/// its blanks. For a noun with another plural, say it another way ("child process").
pub fn plural(n: impl std::fmt::Display, noun: &str) -> String {
    let n = n.to_string();
    if n.trim() == "1" {
        return format!("{n} {noun}");
    }
    let es = ["s", "x", "z", "ch", "sh"].iter().any(|end| noun.ends_with(end));
    format!("{n} {noun}{}", if es { "es" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::plural;

    #[test]
    fn plural_says_one_as_one_and_the_rest_in_the_plural() {
        assert_eq!(plural(1, "CPU"), "1 CPU");
        assert_eq!(plural(2usize, "CPU"), "2 CPUs");
        assert_eq!(plural(0u64, "window"), "0 windows");
        assert_eq!(plural(1, "process"), "1 process");
        assert_eq!(plural(3, "process"), "3 processes");
        assert_eq!(plural(2, "pass"), "2 passes");
        assert_eq!(plural(1.0, "CPU"), "1 CPU");
        assert_eq!(plural(1.5, "CPU"), "1.5 CPUs");
        assert_eq!(plural("1.0", "CPU"), "1.0 CPUs");
        assert_eq!(plural(format!("{:>4}", 1), "sample"), "   1 sample");
        assert_eq!(plural(11, "sample"), "11 samples");
    }
}
