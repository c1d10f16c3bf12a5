# nbdev's template setup.py; all settings are in settings.ini: edit there, not here.
from packaging.version import parse as parse_version
from configparser import ConfigParser
from pathlib import Path
import setuptools, shlex
from setuptools.command.build_py import build_py
assert parse_version(setuptools.__version__)>=parse_version('36.2')

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + "lib_name user branch license status min_python audience language".split()
for o in expected: assert o in cfg, "missing expected setting: {}".format(o)
setup_cfg = {o:cfg[o] for o in cfg_keys}

licenses = {
    'apache2': ('Apache Software License 2.0','OSI Approved :: Apache Software License'),
    'mit': ('MIT License', 'OSI Approved :: MIT License'),
    'gpl2': ('GNU General Public License v2', 'OSI Approved :: GNU General Public License v2 (GPLv2)'),
    'gpl3': ('GNU General Public License v3', 'OSI Approved :: GNU General Public License v3 (GPLv3)'),
    'bsd3': ('BSD License', 'OSI Approved :: BSD License'),
}
statuses = [ '0 - Pre-Planning', '1 - Planning', '2 - Pre-Alpha', '3 - Alpha',
    '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive' ]
py_versions = '3.7 3.8 3.9 3.10 3.11 3.12 3.13'.split()

requirements = shlex.split(cfg.get('requirements', ''))
if cfg.get('pip_requirements'): requirements += shlex.split(cfg.get('pip_requirements', ''))
min_python = cfg['min_python']
lic = licenses.get(cfg['license'].lower(), (cfg['license'], None))
dev_requirements = (cfg.get('dev_requirements') or '').split()

# The files judgelab reads at run time (settings.ini `resources`) stay where they are in the repository; the build copies
# them into the package as judgelab/resources/<the same path>, in the build folder only (never into the source tree).
# judgelab.core.Paths.resource reads the checkout's files in a checkout and this copy in an installed judgelab.
resources = cfg.get('resources', '').split()
class build_py_with_resources(build_py):
    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False): return  # an editable install is a checkout: it reads the repository's files
        dest = Path(self.build_lib)/cfg['lib_path']/'resources'
        for folder in resources:
            if not Path(folder).is_dir(): raise FileNotFoundError(f"settings.ini resources: no folder {folder} (is it in MANIFEST.in?)")
            for f in sorted(Path(folder).rglob('*')):
                if f.is_file() and not {'__pycache__', '.ipynb_checkpoints'} & set(f.parts):
                    self.mkpath(str((dest/f).parent)); self.copy_file(str(f), str(dest/f), preserve_mode=False)

setuptools.setup(
    name = cfg['lib_name'],
    license = lic[0],
    classifiers = [
        'Development Status :: ' + statuses[int(cfg['status'])],
        'Intended Audience :: ' + cfg['audience'].title(),
        'Natural Language :: ' + cfg['language'].title(),
    ] + ['Programming Language :: Python :: '+o for o in py_versions[py_versions.index(min_python):]] + (['License :: ' + lic[1] ] if lic[1] else []),
    url = cfg['git_url'],
    packages = setuptools.find_packages(include=['judgelab', 'judgelab.*']),
    include_package_data = True,
    package_data = {'judgelab': ['site.css']},   # the site's style sheet (judgelab.site.SITE_CSS)
    install_requires = requirements,
    extras_require={ 'dev': dev_requirements, 'gpu': (cfg.get('gpu_requirements') or '').split(),
                     'train': (cfg.get('train_requirements') or '').split() },
    dependency_links = cfg.get('dep_links','').split(),
    python_requires  = '>=' + cfg['min_python'],
    long_description = open('README.md', encoding='utf-8').read(),
    long_description_content_type = 'text/markdown',
    zip_safe = False,
    cmdclass = {'build_py': build_py_with_resources},
    entry_points = {
        'console_scripts': cfg.get('console_scripts','').split(),
        'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d']
    },
    **setup_cfg)
