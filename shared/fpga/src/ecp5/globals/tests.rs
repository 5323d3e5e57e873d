use super::*;

#[test]
fn every_primary_clock_pin_of_the_25k_die_is_found_with_its_mux_input() {
    let die = Die { width: 73, height: 51, centre_col: 31, centre_row: 25, dead: &[] };
    assert_eq!(die.pclkt(0, 29, b'A'), Some((Edge::Top, 0)));
    assert_eq!(die.pclkt(0, 27, b'A'), Some((Edge::Top, 1)));
    assert_eq!(die.pclkt(23, 72, b'A'), Some((Edge::Right, 3)));
    assert_eq!(die.pclkt(26, 72, b'C'), Some((Edge::Right, 0)));
    assert_eq!(die.pclkt(26, 0, b'A'), Some((Edge::Left, 1)));
    assert_eq!(die.pclkt(23, 0, b'C'), Some((Edge::Left, 2)));
    assert_eq!(die.pclkt(23, 0, b'D'), None, "PCLKC pins are complements: no dedicated route");
    assert_eq!(die.pclkt(0, 4, b'B'), None);
}

#[test]
fn fabric_clocks_fill_the_top_edge_first_then_the_left() {
    let die = Die { width: 73, height: 51, centre_col: 31, centre_row: 25, dead: &[] };
    let mut p = Placer { die: &die, taken: HashSet::new(), claimed: HashSet::new() };
    // What nextpnr logs for logic-fed DCCAs: TDCC0, 1, 3, 5, then LDCC0.
    let bels: Vec<(Edge, usize)> = (0..5).map(|_| p.place(Source::Fabric).map(|(e, b, _)| (e, b)).unwrap()).collect();
    assert_eq!(bels, [(Edge::Top, 0), (Edge::Top, 1), (Edge::Top, 3), (Edge::Top, 5), (Edge::Left, 0)]);
}

#[test]
fn a_pin_fed_clock_goes_to_the_nearest_edge_and_a_pclkt_one_to_its_dedicated_bel() {
    let die = Die { width: 73, height: 51, centre_col: 31, centre_row: 25, dead: &[] };
    let mut p = Placer { die: &die, taken: HashSet::new(), claimed: HashSet::new() };
    // The oscillator's first bel, then a top-left pin: the left edge is one tile nearer.
    assert_eq!(p.place(Source::Osc), Some((Edge::Left, 2, None)));
    assert_eq!(p.place(Source::Pin { x: 4, y: 0 }), Some((Edge::Left, 0, Some(0))));
    assert_eq!(p.place(Source::Pclkt { edge: Edge::Right, input: 3, x: 72, y: 23 }), Some((Edge::Right, 1, None)));
    assert_eq!(p.place(Source::Pin { x: 4, y: 0 }), Some((Edge::Left, 1, Some(1))));
    // Bel 2 is the oscillator's, so the next takes bel 3 and the left edge's last entry.
    assert_eq!(p.place(Source::Pin { x: 4, y: 0 }), Some((Edge::Left, 3, Some(3))));
}
