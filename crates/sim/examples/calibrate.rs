//! Prints the calibration table (published vs simulated ratios) and how long it took.

fn main() {
    let t0 = std::time::Instant::now();
    let rows = numapilot_sim::calibrate(&numapilot_sim::SimOptions::default(), &mut |_| {}).expect("calibration runs");
    for r in &rows {
        println!(
            "{:<22} {:<13} published {:.3} simulated {:.3} dev {:5.1}% {}",
            r.test,
            r.policy,
            r.published,
            r.simulated,
            100.0 * r.deviation(),
            if r.within() { "ok" } else { "OUT" }
        );
    }
    println!("wall {:.2} s", t0.elapsed().as_secs_f64());
}
