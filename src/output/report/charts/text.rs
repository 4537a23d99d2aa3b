//! Text in PNG charts, drawn from the bundled font with its metrics kept.
//!
//! Plotters' ab_glyph text backend places each glyph at a whole pixel (its pen position cut to
//! an integer) and drops the glyph's left side bearing (it draws the outline's pixels from the
//! pen position, not from the outline's own bounds), and cuts each glyph's baseline offset
//! separately. Letters with a wide bearing ("h", "m", "n", "r") then sit a pixel left of their
//! place and the gap after them opens: "tim e (s)", "x h eadroom". [`CrispText`] wraps a pixel
//! backend and draws text itself: each glyph at its fractional, kerned pen position, its
//! outline placed by its own pixel bounds, on one baseline; every other call goes to the
//! wrapped backend. Anchors, rotation and text sizes are plotters' own, so layouts are unchanged.

use std::collections::BTreeMap;

use ab_glyph::{point, Font, FontRef, ScaleFont};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// A pixel backend whose text is drawn glyph by glyph from `font`.
pub(super) struct CrispText<B> {
    inner: B,
    font: FontRef<'static>,
}

impl<B: DrawingBackend> CrispText<B> {
    /// Wraps `inner`, its text drawn with the font in `bytes` (`None`: the font cannot be read).
    pub fn new(inner: B, bytes: &'static [u8]) -> Option<Self> {
        let font = FontRef::try_from_slice(bytes).ok()?;
        Some(Self { inner, font })
    }

    /// The coverage of each pixel of `text` drawn at `size`, in text-local pixels: the pen
    /// starts at x 0 and the baseline is at y `size / 2` (rounded), as in plotters. Sorted by
    /// (y, x), so drawing order (and so the output) is deterministic.
    fn coverage(&self, text: &str, size: f64) -> BTreeMap<(i32, i32), f32> {
        let font = self.font.as_scaled(size as f32);
        let baseline = (size / 2.0).round() as f32;
        let mut pen = 0f32;
        let mut prev = None;
        let mut out: BTreeMap<(i32, i32), f32> = BTreeMap::new();
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                pen += font.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(font.scale(), point(pen, baseline));
            if let Some(outline) = self.font.outline_glyph(glyph) {
                let bounds = outline.px_bounds();
                let (x0, y0) = (bounds.min.x as i32, bounds.min.y as i32);
                outline.draw(|x, y, cov| {
                    let at = (y0 + y as i32, x0 + x as i32);
                    let v = out.entry(at).or_insert(0.0);
                    *v = (*v + cov).min(1.0);
                });
            }
            pen += font.h_advance(id);
        }
        out
    }
}

impl<B: DrawingBackend> DrawingBackend for CrispText<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    /// Text anchored and rotated as plotters does, its glyphs drawn by [`CrispText::coverage`].
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let ((min_x, min_y), (max_x, max_y)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let trans = style.transform();
        let (w, h) = self.get_size();
        for ((y, x), cov) in self.coverage(text, style.size()) {
            let (x, y) = trans.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 && cov > 0.0 {
                let c = BackendColor {
                    alpha: color.alpha * f64::from(cov),
                    rgb: color.rgb,
                };
                self.inner.draw_pixel((x, y), c)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that only records its size: enough to lay text out.
    struct Nothing;

    impl DrawingBackend for Nothing {
        type ErrorType = std::io::Error;
        fn get_size(&self) -> (u32, u32) {
            (100, 100)
        }
        fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            Ok(())
        }
        fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            Ok(())
        }
        fn draw_pixel(
            &mut self,
            _: BackendCoord,
            _: BackendColor,
        ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
            Ok(())
        }
    }

    /// The columns with ink in `text`'s coverage.
    fn columns(cov: &BTreeMap<(i32, i32), f32>) -> Vec<i32> {
        let mut xs: Vec<i32> = cov
            .iter()
            .filter(|(_, c)| **c > 0.25)
            .map(|((_, x), _)| *x)
            .collect();
        xs.sort_unstable();
        xs.dedup();
        xs
    }

    fn crisp() -> CrispText<Nothing> {
        CrispText::new(Nothing, super::super::FONT).unwrap()
    }

    #[test]
    fn glyphs_keep_their_left_side_bearing() {
        // "h", "m", "n" and "r" start 1.3 px right of the pen at 17 px; plotters drew them
        // from the pen, a pixel left of their place, which opened "tim e" and "h eadroom".
        for letter in ["h", "m", "n", "r"] {
            let cov = crisp().coverage(letter, 17.0);
            let ink = |x: i32| cov.iter().any(|((_, cx), c)| *cx == x && *c > 0.1);
            assert!(!ink(0) && ink(1), "{letter}: {:?}", columns(&cov));
        }
    }

    #[test]
    fn a_word_is_its_letters_at_their_advances() {
        // The "e" of "me" starts where the font puts it: the pen after "m" plus its own
        // bearing, not at a whole pixel cut from either.
        let word = columns(&crisp().coverage("me", 17.0));
        let m = columns(&crisp().coverage("m", 17.0));
        let e_start = word.iter().copied().find(|x| !m.contains(x)).unwrap();
        let c = crisp();
        let font = c.font.as_scaled(17.0f32);
        let pen = font.h_advance(font.glyph_id('m'));
        let bearing = font.h_side_bearing(font.glyph_id('e'));
        assert!(
            (e_start as f32 - (pen + bearing)).abs() <= 1.0,
            "{word:?}: e at {e_start}, font says {}",
            pen + bearing
        );
        // A space is still a gap.
        let xh = columns(&crisp().coverage("x h", 17.0));
        assert!(xh.windows(2).any(|w| w[1] - w[0] > 4), "{xh:?}");
    }
}
