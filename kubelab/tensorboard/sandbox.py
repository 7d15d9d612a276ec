"""Why TensorBoard's pages cannot act as the user: a sandbox of their own, reached by capability.

Served on the notebook server's origin, a script in a TensorBoard page could read Jupyter's
`_xsrf` cookie and call the kubelab API as the user. So every proxied answer carries
`Content-Security-Policy: sandbox` without `allow-same-origin`: the page gets an opaque origin,
no cookies and no storage of Jupyter's, and a fetch to the kubelab API is a cross-origin request
without credentials. What TensorBoard still needs in there is given to it explicitly:

- its URL is a capability (`kubelab/tensorboard-view/<secret>/`), because a sandboxed page
  sends no cookies; the secret is handed out only by the authenticated entry route's redirect;
- CORS answers (`Access-Control-Allow-Origin: *`, never with credentials), because its data
  queries now come from the opaque origin `null`;
- an in-memory `localStorage`, `sessionStorage` and `document.cookie`, injected before its own
  scripts, because it reads them at start and each throws in a sandbox (its settings then last
  as long as the page); and a `Worker` that starts from its script's text, because a sandboxed
  page may not start a worker from a URL (`worker-src blob:` allows that); a script it cannot
  fetch (its session was stopped meanwhile) is an `error` event, as for any worker. The shim is
  convenience, not protection: a script that reaches past it to the real accessors meets the
  sandbox.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re

SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-popups-to-escape-sandbox allow-downloads"

STORAGE_SHIM = (
    "(function(){"
    "function memory(){var d=new Map();return{"
    "get length(){return d.size},"
    "key:function(i){var k=Array.from(d.keys());return i>=0&&i<k.length?k[i]:null},"
    "getItem:function(k){k=String(k);return d.has(k)?d.get(k):null},"
    "setItem:function(k,v){d.set(String(k),String(v))},"
    "removeItem:function(k){d.delete(String(k))},"
    "clear:function(){d.clear()}}}"
    "['localStorage','sessionStorage'].forEach(function(n){"
    "try{window[n].length}catch(e){"
    "Object.defineProperty(window,n,{value:memory(),configurable:true})}});"
    "try{document.cookie}catch(e){var jar=new Map();"
    "Object.defineProperty(document,'cookie',{configurable:true,"
    "get:function(){return Array.from(jar,function(p){return p[0]+'='+p[1]}).join('; ')},"
    "set:function(v){var p=String(v).split(';')[0],i=p.indexOf('=');"
    "if(i>0)jar.set(p.slice(0,i).trim(),p.slice(i+1).trim())}})}"
    "if(typeof Worker==='function'){var W=Worker;"
    "window.Worker=function(url,options){try{return new W(url,options)}catch(e){"
    "if(e.name!=='SecurityError')throw e;var x=new XMLHttpRequest(),ok=false;"
    "try{x.open('GET',new URL(url,document.baseURI).href,false);x.send();ok=x.status===200}catch(_){}"
    "var code=new Blob([ok?x.responseText:'close()'],{type:'text/javascript'});"
    "var w=new W(URL.createObjectURL(code),options);"
    "if(!ok)setTimeout(function(){w.dispatchEvent(new Event('error'))});return w}};"
    "window.Worker.prototype=W.prototype}"
    "})();"
)
SHIM_SOURCE = f"'sha256-{base64.b64encode(hashlib.sha256(STORAGE_SHIM.encode()).digest()).decode()}'"
_HEAD = re.compile(rb"<head(\s[^>]*)?>", re.IGNORECASE)


def page_policy(upstream: str | None) -> str:
    """The Content-Security-Policy of one proxied answer: TensorBoard's own (if any) with the
    shim's hash allowed as a script, framed by JupyterLab only, in a sandbox."""
    directives = [d.strip() for d in (upstream or "").split(";") if d.strip()]
    kept: dict[str, str] = {}
    for directive in directives:  # a repeated directive: the first one counts, as in browsers
        kept.setdefault(directive.split()[0].lower(), directive)
    kept.pop("frame-ancestors", None)
    kept.pop("sandbox", None)
    if "script-src" in kept:
        kept["script-src"] = f"{kept['script-src']} {SHIM_SOURCE}"
    elif "default-src" in kept:
        kept["script-src"] = " ".join(["script-src", *kept["default-src"].split()[1:], SHIM_SOURCE])
    kept.setdefault("worker-src", "worker-src 'self' blob:")
    return "; ".join([*kept.values(), "frame-ancestors 'self'", SANDBOX])


def with_storage_shim(html: bytes, encoding: str | None) -> bytes:
    """`html` with the storage shim as its first script (decompressed first if gzip'ed), its
    fonts asked for under the page's own path."""
    if encoding == "gzip":
        html = gzip.decompress(html)
    # Its inline @font-face rules name `/font-roboto/` at the server's root, outside its
    # --path_prefix; relative, they reach the fonts TensorBoard serves under it.
    html = html.replace(b"url(/font-roboto/", b"url(font-roboto/")
    tag = f"<script>{STORAGE_SHIM}</script>".encode()
    head = _HEAD.search(html)
    if head is None:
        return tag + html
    return html[: head.end()] + tag + html[head.end() :]
