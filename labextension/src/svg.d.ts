// The builder loads .svg imported from code as its source text (asset/source).
declare module '*.svg' {
  const svgstr: string;
  export default svgstr;
}
