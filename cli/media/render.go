package media

import (
	"bytes"
	"image"
	"image/jpeg"
	"io"

	"golang.org/x/image/draw"
)

// The sizes of the two renditions, their longest side in pixels; a smaller
// photo is not enlarged.
const (
	ThumbnailSide = 512
	PreviewSide   = 2048
)

// jpegQuality keeps a 2048-pixel preview around 400 KiB and a thumbnail
// around 50 KiB.
const jpegQuality = 82

// Renditions decodes a still (JPEG, PNG, GIF or WebP), turns it upright
// by its EXIF orientation (1 to 8), and returns a thumbnail and a preview
// as JPEG. The preview is scaled from the photo with Catmull-Rom and then
// turned (a square bound makes the order free, and turning the preview is
// cheaper than turning the photo), the thumbnail scaled from the preview:
// one pass over the full-size pixels.
func Renditions(r io.Reader, orientation int) (thumbnail, preview []byte, err error) {
	src, _, err := image.Decode(r)
	if err != nil {
		return nil, nil, err
	}
	pv := upright(scale(src, PreviewSide), orientation)
	th := scale(pv, ThumbnailSide)
	if preview, err = encodeJPEG(pv); err != nil {
		return nil, nil, err
	}
	if thumbnail, err = encodeJPEG(th); err != nil {
		return nil, nil, err
	}
	return thumbnail, preview, nil
}

func encodeJPEG(m image.Image) ([]byte, error) {
	var b bytes.Buffer
	err := jpeg.Encode(&b, m, &jpeg.Options{Quality: jpegQuality})
	return b.Bytes(), err
}

// scale fits m within side×side, keeping its aspect; m as it is when it
// fits already.
func scale(m image.Image, side int) image.Image {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	if w <= side && h <= side {
		return m
	}
	if w >= h {
		w, h = side, max(1, h*side/w)
	} else {
		w, h = max(1, w*side/h), side
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), m, b, draw.Src, nil)
	return dst
}

// upright applies EXIF orientation o: 2 mirrors, 3 turns 180°, 4 flips,
// 5 transposes, 6 turns 90° clockwise, 7 transverses, 8 turns 90°
// counter-clockwise; anything else leaves m as it is.
func upright(m image.Image, o int) image.Image {
	if o < 2 || o > 8 {
		return m
	}
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	dst := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var dx, dy int
			switch o {
			case 2:
				dx, dy = w-1-x, y
			case 3:
				dx, dy = w-1-x, h-1-y
			case 4:
				dx, dy = x, h-1-y
			case 5:
				dx, dy = y, x
			case 6:
				dx, dy = h-1-y, x
			case 7:
				dx, dy = h-1-y, w-1-x
			case 8:
				dx, dy = y, w-1-x
			}
			dst.Set(dx, dy, m.At(b.Min.X+x, b.Min.Y+y))
		}
	}
	return dst
}
