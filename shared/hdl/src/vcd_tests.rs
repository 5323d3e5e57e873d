//! The dump reader and the window, on dumps as Icarus writes them, random dumps and any text.

use super::*;

/// A dump as Icarus writes it: a clock, a counter, a scalar in a sub-scope.
fn dump(steps: u64) -> String {
    let mut text = String::from(
        "$date today $end\n$version Icarus Verilog $end\n$timescale\n\t1ps\n$end\n$scope module tb $end\n\
         $var reg 1 ! clk $end\n$var wire 8 \" count [7:0] $end\n$scope module dut $end\n\
         $var reg 1 # en $end\n$upscope $end\n$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n0!\nbx \"\nx#\n$end\n",
    );
    for i in 1..=steps {
        text.push_str(&format!("#{}\n{}!\n", i * 5000, i % 2));
        if i % 2 == 1 {
            text.push_str(&format!("b{:b} \"\n", (i / 2) % 256));
        }
        if i == 3 {
            text.push_str("1#\n");
        }
    }
    text
}

#[test]
fn a_dump_reads_as_its_timescale_signals_and_changes() {
    let vcd = parse(&dump(4));
    assert_eq!(vcd.timescale.as_deref(), Some("1ps"));
    let names: Vec<_> = vcd.signals.iter().map(|s| (s.name.as_str(), s.width, s.code.as_str())).collect();
    assert_eq!(names, [("tb.clk", 1, "!"), ("tb.count", 8, "\""), ("tb.dut.en", 1, "#")]);
    assert_eq!(vcd.signals[2].depth(), 2);
    assert_eq!(vcd.end, 20000);
    let count: Vec<_> = vcd.changes_of("\"").map(|c| (c.time, c.value.as_str())).collect();
    assert_eq!(count, [(0, "x"), (5000, "0"), (15000, "1")]);
    let en: Vec<_> = vcd.changes_of("#").map(|c| (c.time, c.value.as_str())).collect();
    assert_eq!(en, [(0, "x"), (15000, "1")]);
}

#[test]
fn a_dump_that_fits_is_its_own_window() {
    let text = dump(10);
    let w = window(&text, 20000, 1 << 20).unwrap();
    assert_eq!((w.text.as_str(), w.from, w.to, w.cut), (text.as_str(), 0, 50000, false));
}

#[test]
fn a_cut_window_starts_with_every_value_and_holds_the_focus() {
    let text = dump(5000);
    let focus = 4000 * 5000;
    let w = window(&text, focus, 4096).unwrap();
    assert!(w.text.len() <= 4096, "{}", w.text.len());
    assert!(w.cut);
    assert!(w.from < focus && focus < w.to, "{} {} {}", w.from, focus, w.to);
    let cut = parse(&w.text);
    let whole = parse(&text);
    assert_eq!(cut.signals, whole.signals);
    // At the window's start every signal has the value it had in the whole dump.
    for signal in &whole.signals {
        let before = |v: &Vcd| v.changes_of(&signal.code).filter(|c| c.time <= w.from).last().cloned();
        assert_eq!(before(&cut).map(|c| c.value), before(&whole).map(|c| c.value), "{}", signal.name);
    }
    // And every change after it up to the window's end is the whole dump's.
    let span = |v: &Vcd| v.changes.iter().filter(|c| c.time > w.from && c.time <= w.to).cloned().collect::<Vec<_>>();
    assert!(span(&cut) == span(&whole), "the window's changes differ from the whole dump's");
    // About three quarters of it lead to the focus.
    assert!(focus - w.from > 2 * (w.to - focus), "{} {} {}", w.from, focus, w.to);
}

#[test]
fn a_focus_past_the_end_keeps_the_last_changes() {
    let text = dump(5000);
    let w = window(&text, u64::MAX, 4096).unwrap();
    assert_eq!(w.to, 5000 * 5000);
    assert!(w.cut && w.text.len() <= 4096);
}

#[test]
fn declarations_larger_than_the_room_give_no_window() {
    assert_eq!(window(&dump(5000), 0, 200), None);
}

#[test]
fn garbage_reads_as_nothing_without_panicking() {
    let multibyte = format!("$enddefinitions $end\n#1\n1!\n#2\n{}\n#3\n", "\u{e9}".repeat(40));
    for text in [
        "",
        "#",
        "$var",
        "#x\n1",
        "$enddefinitions $end #5 b1",
        "\u{e9}\u{e9} #18446744073709551616 r",
        "$comment #3 $end",
        &multibyte,
    ] {
        let _ = parse(text);
        let _ = window(text, 3, 8);
        let _ = window(text, 3, 1 << 10);
        for max in 0..text.len() {
            let _ = window(text, 2, max);
        }
    }
}

/// A dump of `signals` scalars and one vector, changing as `steps` says (signal, value).
fn random_dump(signals: usize, steps: &[(u16, usize, u8)]) -> String {
    let mut text = String::from("$timescale 1ns $end\n$scope module tb $end\n");
    for i in 0..signals {
        text.push_str(&format!("$var reg 1 s{i} sig{i} $end\n"));
    }
    text.push_str("$var reg 4 v bus [3:0] $end\n$upscope $end\n$enddefinitions $end\n#0\n$dumpvars\n");
    (0..signals).for_each(|i| text.push_str(&format!("xs{i}\n")));
    text.push_str("bxxxx v\n$end\n");
    let mut now = 0u64;
    for &(gap, signal, value) in steps {
        now += u64::from(gap) + 1;
        text.push_str(&format!("#{now}\n"));
        match signal % (signals + 1) {
            i if i == signals => text.push_str(&format!("b{:b} v\n", value % 16)),
            i => text.push_str(&format!("{}s{i}\n", value % 2)),
        }
    }
    text
}

proptest::proptest! {
    #[test]
    fn any_text_reads_without_panicking(text in "\\PC{0,200}", focus: u64, max in 0usize..300) {
        let _ = parse(&text);
        let _ = summary(&text);
        let _ = window(&text, focus, max);
    }

    #[test]
    fn a_window_fits_and_agrees_with_the_whole_dump(
        signals in 1usize..6,
        steps in proptest::collection::vec((0u16..50, 0usize..8, 0u8..16), 0..400),
        focus in 0u64..20_000,
        max in 200usize..4000,
    ) {
        let text = random_dump(signals, &steps);
        let Some(w) = window(&text, focus, max) else { return Ok(()) };
        proptest::prop_assert!(w.text.len() <= max);
        let (cut, whole) = (parse(&w.text), parse(&text));
        proptest::prop_assert_eq!(&cut.signals, &whole.signals);
        for signal in &whole.signals {
            let at_from = |v: &Vcd| v.changes_of(&signal.code).filter(|c| c.time <= w.from).last().map(|c| c.value.clone());
            proptest::prop_assert_eq!(at_from(&cut), at_from(&whole), "{} at {}", signal.name, w.from);
        }
        let span = |v: &Vcd| v.changes.iter().filter(|c| c.time > w.from && c.time <= w.to).cloned().collect::<Vec<_>>();
        proptest::prop_assert!(span(&cut) == span(&whole));
    }
}
