from __future__ import annotations

from wake.cli import main

if __name__ == "__main__":
    main()
