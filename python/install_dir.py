#!/usr/bin/env python3
"""install_dir.py PREFIX — where `cmake --install --prefix PREFIX` puts the geotrain package for
the Python running this script: the first directory of its sys.path inside PREFIX that is a
site directory (Debian: /usr -> /usr/lib/python3/dist-packages, /usr/local ->
/usr/local/lib/python3.X/dist-packages; a virtual environment's own site-packages), else that
Python's scheme for PREFIX (then PREFIX is not where it looks: a line on stderr says so).
"""
import os
import sys
import sysconfig


def main():
    prefix = os.path.realpath(sys.argv[1])
    for p in sys.path:
        if not p or not p.endswith(("site-packages", "dist-packages")):
            continue
        real = os.path.realpath(p)
        rel = os.path.relpath(real, prefix)
        if not rel.startswith("..") and rel.startswith("lib"):
            print(real)
            return 0
    if sys.prefix != sys.base_prefix and os.path.realpath(sys.prefix) == prefix:
        print(sysconfig.get_path("purelib"))
        return 0
    scheme = "deb_system" if "deb_system" in sysconfig.get_scheme_names() else "posix_prefix"
    dest = sysconfig.get_path("purelib", scheme, vars={"base": prefix, "platbase": prefix})
    print(dest)
    print("geotrain: %s is not on %s's path: set PYTHONPATH=%s to import geotrain"
          % (dest, sys.executable, dest), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
