//! PNG plots with plotters' bitmap backend. Text is drawn with ab_glyph from a TrueType
//! font file found on the machine (Debian's fonts-dejavu-core); without one, the plots are
//! drawn without text and the markdown carries the legend. No fontconfig or freetype needed.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::FontStyle;
use serde_json::Value;

const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a font for text once; false if none was found (plots then carry no text).
fn font() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        for f in FONTS {
            if let Ok(bytes) = std::fs::read(f) {
                // register_font needs 'static bytes: one font, leaked once per process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

const DOVECOT: RGBColor = RGBColor(31, 90, 200);
const MAILDEX: RGBColor = RGBColor(210, 40, 40);
const XAPIAN: RGBColor = RGBColor(40, 150, 60);

/// A line to draw: points, colour, dashed, legend text.
struct Line {
    points: Vec<(f64, f64)>,
    color: RGBColor,
    dashed: bool,
    label: String,
}

fn draw(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    log_y: bool,
) -> Result<()> {
    let text = font();
    let pts = lines.iter().flat_map(|l| l.points.iter());
    let x_max = pts.clone().map(|p| p.0).fold(1.0, f64::max) * 1.05;
    let y_max = pts.clone().map(|p| p.1).fold(1e-3, f64::max) * 1.3;
    let y_min = pts
        .map(|p| p.1)
        .filter(|y| *y > 0.0)
        .fold(f64::INFINITY, f64::min);
    let y_min = if y_min.is_finite() { y_min / 1.5 } else { 0.1 };
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| anyhow!("plot {}: {e}", path.display());
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut b = ChartBuilder::on(&root);
    b.margin(20);
    if text {
        b.caption(title, ("sans-serif", 22))
            .x_label_area_size(45)
            .y_label_area_size(70);
    } else {
        b.x_label_area_size(5).y_label_area_size(5);
    }
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            let mut mesh = chart.configure_mesh();
            if text {
                mesh.x_desc(x_label)
                    .y_desc(y_label)
                    .label_style(("sans-serif", 15))
                    .x_label_formatter(&|x| format!("{x:.0}"))
                    .y_label_formatter(&|y| format!("{y:.0}"));
            } else {
                mesh.x_labels(0).y_labels(0);
            }
            mesh.draw().map_err(|x| e(&x))?;
            for l in lines {
                let style = ShapeStyle {
                    color: l.color.to_rgba(),
                    filled: true,
                    stroke_width: 2,
                };
                let series = if l.dashed {
                    chart
                        .draw_series(DashedLineSeries::new(l.points.clone(), 8, 6, style))
                        .map_err(|x| e(&x))?
                } else {
                    chart
                        .draw_series(LineSeries::new(l.points.clone(), style))
                        .map_err(|x| e(&x))?
                };
                if text {
                    let (c, gap) = (l.color, if l.dashed { 6 } else { 0 });
                    // A dashed line's legend entry is two short strokes.
                    series.label(l.label.clone()).legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (10 - gap / 2, 0)], c.stroke_width(2))
                            + PathElement::new(vec![(10 + gap / 2, 0), (20, 0)], c.stroke_width(2))
                    });
                }
                chart
                    .draw_series(
                        l.points
                            .iter()
                            .map(|&p| Circle::new(p, 4, l.color.filled())),
                    )
                    .map_err(|x| e(&x))?;
            }
            if text {
                legend(&mut chart, SeriesLabelPosition::UpperLeft, path)?;
            }
        }};
    }
    if log_y {
        body!(b
            .build_cartesian_2d(0.0..x_max, (y_min..y_max).log_scale())
            .map_err(|x| e(&x))?);
    } else {
        body!(b
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(|x| e(&x))?);
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// The boxed legend of the labelled series, at `pos`.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
    path: &Path,
) -> Result<()> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(pos)
        .draw()
        .map_err(|x| anyhow!("plot {}: {x}", path.display()))
}

/// Listing time (mutt listing, first and warm) against INBOX size, both servers.
pub fn listing(r: &Value, path: &Path) -> Result<()> {
    let sizes: Vec<u64> = r["corpus"]["sizes"]
        .as_array()
        .map_or_else(Vec::new, |a| a.iter().filter_map(Value::as_u64).collect());
    let lines = first_and_warm(|server, kind| {
        sizes
            .iter()
            .filter_map(|n| {
                Some((
                    *n as f64,
                    r["listing"][n.to_string()][server]["mutt"][kind]["ms"].as_f64()?,
                ))
            })
            .collect()
    });
    draw(
        path,
        "mutt listing: time against INBOX size",
        "messages in INBOX",
        "ms (log scale)",
        &lines,
        true,
    )
}

/// Four lines, first (solid) and warm (dashed) of each server, from `points(server, kind)`;
/// a line without points is left out.
fn first_and_warm(points: impl Fn(&str, &str) -> Vec<(f64, f64)>) -> Vec<Line> {
    let mut lines = Vec::new();
    for (server, color) in [("dovecot", DOVECOT), ("maildex", MAILDEX)] {
        for (kind, dashed) in [("first", false), ("warm", true)] {
            let points = points(server, kind);
            if !points.is_empty() {
                lines.push(Line {
                    points,
                    color,
                    dashed,
                    label: format!("{server} {kind}"),
                });
            }
        }
    }
    lines
}

/// Server memory (PSS sum over processes) against idle connections, both servers.
pub fn idle(r: &Value, path: &Path) -> Result<()> {
    let mut lines = Vec::new();
    for (server, color) in [("dovecot", DOVECOT), ("maildex", MAILDEX)] {
        let s = &r["idle"]["servers"][server];
        let mut points = vec![];
        if let Some(b) = s["base"]["pss_kib"].as_f64() {
            points.push((0.0, b / 1024.0));
        }
        for p in s["points"].as_array().into_iter().flatten() {
            if let (Some(n), Some(k)) = (p["connections"].as_f64(), p["pss_kib"].as_f64()) {
                points.push((n, k / 1024.0));
            }
        }
        if points.len() > 1 {
            lines.push(Line {
                points,
                color,
                dashed: false,
                label: format!("{server} (PSS of all processes)"),
            });
        }
    }
    draw(
        path,
        "server memory against connections in IDLE",
        "connections in IDLE",
        "MiB",
        &lines,
        false,
    )
}

/// SORT (SUBJECT) time against INBOX size, first after delivery (solid) and warm (dashed),
/// both servers (`maildex-bench sort --plot`).
pub fn sort(r: &Value, path: &Path) -> Result<()> {
    let sizes = r["sizes"].as_array().cloned().unwrap_or_default();
    let lines = first_and_warm(|server, kind| {
        sizes
            .iter()
            .filter_map(|s| {
                Some((
                    s["messages"].as_f64()?,
                    s["queries"]["subject"][server][format!("{kind}_ms")].as_f64()?,
                ))
            })
            .collect()
    });
    draw(
        path,
        "SORT (SUBJECT) UTF-8 ALL: time against INBOX size",
        "messages in INBOX",
        "ms (log scale)",
        &lines,
        true,
    )
}

/// LMTP messages/s by directory (MariaDB, OpenLDAP), a bar per server
/// (`maildex-bench seed --plot`).
pub fn seed_lmtp(r: &Value, path: &Path) -> Result<()> {
    let text = font();
    // (label, directory, pass): new users, then the same users again
    let dirs = [
        ("MariaDB, new users", "MariaDB", "first"),
        ("MariaDB, again", "MariaDB", "second"),
        ("OpenLDAP, new users", "OpenLDAP", "first"),
        ("OpenLDAP, again", "OpenLDAP", "second"),
    ];
    let servers = [("dovecot", DOVECOT), ("maildex", MAILDEX)];
    let rate =
        |d: &(&str, &str, &str), s: &str| r["lmtp"][d.1][s][d.2]["per_sec"].as_f64().unwrap_or(0.0);
    let y_max = dirs
        .iter()
        .flat_map(|d| servers.iter().map(move |(s, _)| rate(d, s)))
        .fold(1.0, f64::max)
        * 1.2;
    let e = |e: &dyn std::fmt::Display| anyhow!("plot {}: {e}", path.display());
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut b = ChartBuilder::on(&root);
    b.margin(20);
    if text {
        b.caption(
            "LMTP, one message to each of many users: messages/s",
            ("sans-serif", 22),
        )
        .x_label_area_size(45)
        .y_label_area_size(70);
    }
    let mut chart = b
        .build_cartesian_2d(0.0..dirs.len() as f64, 0.0..y_max)
        .map_err(|x| e(&x))?;
    // the directory's name under the middle of its pair of bars
    let x_label = |x: &f64| {
        let i = (x - 0.5).round();
        if (x - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < dirs.len() {
            dirs[i as usize].0.to_owned()
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh();
    if text {
        mesh.y_desc("messages/s")
            .label_style(("sans-serif", 15))
            .x_labels(dirs.len() * 2 + 1)
            .x_label_formatter(&x_label)
            .y_label_formatter(&|y| format!("{y:.0}"));
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(|x| e(&x))?;
    for (k, (server, color)) in servers.iter().enumerate() {
        let bars = dirs.iter().enumerate().map(|(i, d)| {
            let x0 = i as f64 + 0.15 + k as f64 * 0.35;
            Rectangle::new([(x0, 0.0), (x0 + 0.33, rate(d, server))], color.filled())
        });
        let series = chart.draw_series(bars).map_err(|x| e(&x))?;
        if text {
            let c = *color;
            series
                .label(*server)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], c.filled()));
        }
    }
    if text {
        legend(&mut chart, SeriesLabelPosition::UpperRight, path)?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// SEARCH BODY (the rare word) time against INBOX size: Dovecot's scan, Dovecot with
/// fts-xapian (when measured) and maildex (`maildex-bench search --plot`).
pub fn search_body(r: &Value, path: &Path) -> Result<()> {
    let sizes = r["sizes"].as_array().cloned().unwrap_or_default();
    let mut lines = Vec::new();
    for (server, color, label) in [
        ("dovecot", DOVECOT, "Dovecot (scan)"),
        ("xapian", XAPIAN, "Dovecot + fts-xapian"),
        ("maildex", MAILDEX, "maildex"),
    ] {
        let points: Vec<(f64, f64)> = sizes
            .iter()
            .filter_map(|s| {
                Some((
                    s["messages"].as_f64()?,
                    s["servers"][server]["body_rare"]["ms"].as_f64()?,
                ))
            })
            .collect();
        if !points.is_empty() {
            lines.push(Line {
                points,
                color,
                dashed: false,
                label: label.into(),
            });
        }
    }
    draw(
        path,
        "SEARCH BODY (a rare word), warm: time against INBOX size",
        "messages in INBOX",
        "ms (log scale)",
        &lines,
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_png_files() {
        let tmp = tempfile::tempdir().unwrap();
        let r = serde_json::json!({
            "corpus": {"sizes": [100, 300]},
            "listing": {
                "100": {"dovecot": {"mutt": {"first": {"ms": 50.0}, "warm": {"ms": 5.0}}}},
                "300": {"dovecot": {"mutt": {"first": {"ms": 150.0}, "warm": {"ms": 15.0}}}}
            },
            "idle": {"servers": {"dovecot": {"base": {"pss_kib": 2048}, "points": [{"connections": 10, "pss_kib": 8192}]}}},
            "sizes": [
                {"messages": 100, "servers": {"dovecot": {"body_rare": {"ms": 40.0}}, "xapian": {"body_rare": {"ms": 4.0}}, "maildex": {"body_rare": {"ms": 1.0}}}},
                {"messages": 300, "servers": {"dovecot": {"body_rare": {"ms": 120.0}}, "xapian": {"body_rare": {"ms": 5.0}}, "maildex": {"body_rare": {"ms": 2.0}}}}
            ]
        });
        let pass =
            |x: f64| serde_json::json!({"first": {"per_sec": x}, "second": {"per_sec": x * 2.0}});
        let seed = serde_json::json!({"lmtp": {
            "MariaDB": {"maildex": pass(900.0), "dovecot": pass(400.0)},
            "OpenLDAP": {"maildex": pass(800.0), "dovecot": pass(350.0)}
        }});
        let path = tmp.path().join("s.png");
        seed_lmtp(&seed, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        for (f, p) in [
            (listing as fn(&Value, &Path) -> Result<()>, "l.png"),
            (idle, "i.png"),
            (search_body, "s.png"),
        ] {
            let path = tmp.path().join(p);
            f(&r, &path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(&bytes[1..4], b"PNG");
            assert!(bytes.len() > 2000, "{} bytes", bytes.len());
        }
    }
}
