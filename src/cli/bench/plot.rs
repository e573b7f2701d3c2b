//! `vigil bench --svg`: the timings as a bar chart a reader can take in at a glance.
//!
//! One group of bars per tier, one bar per timed path (per row, in batches, through a stepper),
//! each the median of the repetitions with a whisker from the fastest to the slowest. The value
//! axis is logarithmic, because the paths differ by orders of magnitude (a batch kernel at 1 ns
//! a row beside a canonical tier at 150 ns) and on a linear axis the fast bars, the ones worth
//! looking at, would be a few pixels tall. The colours are the Okabe–Ito palette, told apart
//! with any of the common colour-vision deficiencies, and the legend shows a swatch of each.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One timed path of one tier, in ns per row: the median of the repetitions and the fastest
/// and slowest of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Timing {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Timing {
    /// The timing of the repetitions `xs` (not empty).
    pub fn of(xs: &[f64]) -> Timing {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        Timing {
            median: v[v.len() / 2],
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

/// The timed paths, in the order of a tier's bars: their legend names and colours.
pub(super) const PATHS: [(&str, RGBColor); 3] = [
    // Okabe–Ito blue, orange and bluish green.
    ("per row (Monitor::step)", RGBColor(0x00, 0x72, 0xB2)),
    ("in batches (run_batch)", RGBColor(0xE6, 0x9F, 0x00)),
    ("through a Stepper", RGBColor(0x00, 0x9E, 0x73)),
];

/// A tier's bars: its label and a timing per path (`None`: not timed).
pub(super) struct TierBars {
    pub label: String,
    pub paths: [Option<Timing>; 3],
}

/// Draws the chart as an SVG document titled `title` with the `subtitle` line under it (what
/// was run, where and when).
pub(super) fn svg(title: &str, subtitle: &str, tiers: &[TierBars]) -> Result<String, String> {
    let mut out = String::new();
    let width = (220 + 150 * tiers.len() as u32).max(720);
    draw(
        SVGBackend::with_string(&mut out, (width, 480)),
        title,
        subtitle,
        tiers,
    )
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// The value axis' range: whole powers of ten around every whisker, so that each bar's
/// height is its distance in decades from the axis' floor.
fn decades(tiers: &[TierBars]) -> (f64, f64) {
    let timings = || tiers.iter().flat_map(|t| t.paths.iter().flatten());
    let lo = timings()
        .map(|t| t.min)
        .filter(|x| *x > 0.0)
        .fold(f64::INFINITY, f64::min);
    let hi = timings().map(|t| t.max).fold(0.0, f64::max);
    if !lo.is_finite() || hi <= 0.0 {
        return (0.1, 1000.0);
    }
    // One decade below the fastest bar, so that even it stands a decade tall, and room above
    // the slowest for its label and the legend.
    let lo = 10f64.powf(lo.log10().floor() - 1.0);
    let hi = 10f64.powf((hi * 3.0).log10().ceil()).max(lo * 100.0);
    (lo, hi)
}

/// `{:.3}`-like with three significant digits (`0.704`, `46.9`, `159`).
pub(super) fn short(x: f64) -> String {
    match x {
        x if x >= 100.0 => format!("{x:.0}"),
        x if x >= 10.0 => format!("{x:.1}"),
        x if x >= 1.0 => format!("{x:.2}"),
        x => format!("{x:.3}"),
    }
}

fn draw<DB: DrawingBackend>(
    backend: DB,
    title: &str,
    subtitle: &str,
    tiers: &[TierBars],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let root = backend.into_drawing_area();
    root.fill(&WHITE)?;
    root.draw(&Text::new(
        title.to_string(),
        (16, 10),
        ("sans-serif", 20).into_font().style(FontStyle::Bold),
    ))?;
    root.draw(&Text::new(
        subtitle.to_string(),
        (16, 36),
        ("sans-serif", 13)
            .into_font()
            .color(&RGBColor(0x44, 0x44, 0x44)),
    ))?;
    let area = root.margin(60, 10, 10, 20);
    let (lo, hi) = decades(tiers);
    let n = tiers.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&area)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_desc("tier")
        .y_desc("ns per row (log scale): median, whiskers fastest to slowest")
        .y_label_formatter(&|y| short(*y))
        .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
        .bold_line_style(RGBColor(0xBB, 0xBB, 0xBB))
        .axis_desc_style(("sans-serif", 13))
        .label_style(("sans-serif", 12))
        .draw()?;
    // Three bar slots per tier, centred on it, whether or not each path was timed.
    let slot = 0.8 / PATHS.len() as f64;
    for (k, (name, colour)) in PATHS.iter().enumerate() {
        let bars = tiers.iter().enumerate().filter_map(|(i, t)| {
            let timing = t.paths[k]?;
            let left = i as f64 + 0.1 + slot * k as f64;
            Some((left, timing))
        });
        let colour = *colour;
        chart
            .draw_series(bars.clone().map(move |(left, t)| {
                Rectangle::new(
                    [(left + slot * 0.1, lo), (left + slot * 0.9, t.median)],
                    colour.filled(),
                )
            }))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled()));
        // Whiskers: a vertical line from the fastest to the slowest repetition, with caps.
        let black = RGBColor(0x22, 0x22, 0x22);
        chart.draw_series(bars.clone().flat_map(move |(left, t)| {
            let mid = left + slot / 2.0;
            let cap = slot * 0.2;
            [
                PathElement::new(vec![(mid, t.min), (mid, t.max)], black),
                PathElement::new(vec![(mid - cap, t.min), (mid + cap, t.min)], black),
                PathElement::new(vec![(mid - cap, t.max), (mid + cap, t.max)], black),
            ]
        }))?;
        // The median above each bar's whisker.
        let above = Pos::new(HPos::Center, VPos::Bottom);
        chart.draw_series(bars.map(move |(left, t)| {
            Text::new(
                short(t.median),
                (left + slot / 2.0, t.max),
                ("sans-serif", 11).into_font().color(&black).pos(above),
            )
        }))?;
    }
    // The tiers' names under their groups.
    let centred = Pos::new(HPos::Center, VPos::Top);
    for (i, t) in tiers.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, lo));
        root.draw(&Text::new(
            t.label.clone(),
            (x, y + 8),
            ("sans-serif", 13).into_font().color(&BLACK).pos(centred),
        ))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(0x99, 0x99, 0x99))
        .label_font(("sans-serif", 12))
        .draw()?;
    root.present()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(median: f64) -> Option<Timing> {
        Some(Timing {
            median,
            min: median * 0.9,
            max: median * 1.2,
        })
    }

    fn example() -> Vec<TierBars> {
        vec![
            TierBars {
                label: "canonical".into(),
                paths: [timing(160.0), timing(150.0), None],
            },
            TierBars {
                label: "native-whole".into(),
                paths: [timing(47.0), timing(11.0), None],
            },
        ]
    }

    /// Every `<rect …>` of `svg` filled with `colour` (`#RRGGBB`), as (y, height).
    fn rects(svg: &str, colour: &str) -> Vec<(f64, f64)> {
        svg.split("<rect")
            .skip(1)
            .filter(|r| r.contains(&format!("fill=\"{colour}\"")))
            .map(|r| {
                let attr = |name: &str| -> f64 {
                    let at = r.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
                    r[at..].split('"').next().unwrap().parse().unwrap()
                };
                (attr("y"), attr("height"))
            })
            .collect()
    }

    /// The texts of `svg`, in order.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text")
            .skip(1)
            .map(|t| {
                let start = t.find('>').unwrap() + 1;
                t[start..start + t[start..].find("</text>").unwrap()].trim()
            })
            .collect()
    }

    #[test]
    fn the_chart_has_a_title_axes_a_legend_and_the_tiers() {
        let svg = svg("vigil bench: chain.dsrv", "100000 rows × 5", &example()).unwrap();
        expect_test::expect![[r#"
            vigil bench: chain.dsrv
            100000 rows × 5
            ns per row (log scale): median, whiskers fastest to slowest
            tier
            1.00
            10.0
            100
            1000
            160
            47.0
            150
            11.0
            canonical
            native-whole
            per row (Monitor::step)
            in batches (run_batch)
            through a Stepper
        "#]]
        .assert_eq(&(texts(&svg).join("\n") + "\n"));
    }

    /// On a log axis a fast bar is still a bar: 11 ns beside 160 ns is more than half the
    /// height, where a linear axis made it 7% (the old chart: "10 px tall").
    #[test]
    fn a_fast_bar_is_readable_beside_a_slow_one() {
        let svg = svg("t", "s", &example()).unwrap();
        let blue = rects(&svg, "#0072B2");
        let orange = rects(&svg, "#E69F00");
        assert_eq!(
            (blue.len(), orange.len()),
            (2 + 1, 2 + 1),
            "bars and a swatch each"
        );
        let slowest = blue[0].1;
        let fastest = orange[1].1;
        assert!(fastest > 0.5 * slowest, "{fastest} px against {slowest} px");
        // Bars stand on one floor.
        let floor = |(y, h): (f64, f64)| y + h;
        assert_eq!(floor(blue[0]), floor(orange[1]));
    }

    /// Only the palette's colours fill the bars: no red and green pair.
    #[test]
    fn the_palette_is_colour_blind_safe() {
        let svg = svg("t", "s", &example()).unwrap();
        assert!(!svg.contains("#FF0000") && !svg.contains("#00FF00"));
        assert_eq!(rects(&svg, "#009E73").len(), 1, "the stepper's swatch only");
    }

    /// A whisker per bar (its line and two caps), from the fastest to the slowest repetition.
    #[test]
    fn every_bar_has_a_whisker() {
        let svg = svg("t", "s", &example()).unwrap();
        let whiskers = svg.matches("stroke=\"#222222\"").count();
        assert_eq!(whiskers, 4 * 3);
    }

    #[test]
    fn the_axis_spans_whole_decades_around_the_whiskers() {
        // Whiskers from 9.9 to 192 ns: a decade under the fastest, room over the slowest.
        assert_eq!(decades(&example()), (0.1, 1000.0));
        assert_eq!(decades(&[]), (0.1, 1000.0));
        assert_eq!(short(0.7041), "0.704");
        assert_eq!(short(159.3), "159");
    }
}
